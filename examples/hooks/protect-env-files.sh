#!/bin/sh
# protect-env-files.sh: a before hook that answers in JSON. It blocks writes
# to .env files and lets everything else through with a note for the model.
#
#   hooks:
#     rules:
#       - name: protect-env-files
#         phase: before
#         match: tool in ["write_file", "edit_file"]
#         command: {argv: [examples/hooks/protect-env-files.sh], timeout: 5s}
#
# The reply follows schemas/hook-output.schema.json:
#   {"decision": "allow" | "block", "reason": "...", "updated_args": {...},
#    "updated_result": {"content": "...", "is_error": false},
#    "additional_context": "..."}
IFS= read -r input
args=${input#*\"args\":}

# The value of "path" (for a path without escaped quotes).
case "$args" in
*'"path":"'*) path=${args#*\"path\":\"} path=${path%%\"*} ;;
*) path= ;;
esac

case "$path" in
.env | .env.* | */.env | */.env.*)
	printf '%s\n' '{"decision":"block","reason":".env files hold secrets and are edited by people only."}'
	;;
*)
	printf '%s\n' '{"decision":"allow","additional_context":"checked by protect-env-files: not an .env file"}'
	;;
esac
