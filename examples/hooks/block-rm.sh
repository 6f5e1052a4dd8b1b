#!/bin/sh
# block-rm.sh: a before hook that vetoes any run_command call running rm.
#
#   hooks:
#     rules:
#       - name: no-rm
#         phase: before
#         match: tool == "run_command"
#         command: {argv: [examples/hooks/block-rm.sh], timeout: 5s}
#
# The kernel writes one line of JSON on stdin (schemas/hook-input.schema.json),
# compact, with "args" after "tool". Exit code 2 blocks the call and stderr is
# the reason the model reads; exit code 0 with no output allows it. The hook
# gets no environment at all unless the rule lists names in env, so it uses
# only shell built-ins.
IFS= read -r input

# Only the arguments matter: everything after "args":.
args=${input#*\"args\":}

# A JSON string that is "rm" or ends in "/rm" (an argv element such as
# "/bin/rm"), or a string in which rm starts a shell command ("rm -rf x",
# "cd build && rm -rf x").
case "$args" in
*'"rm"'* | *'/rm"'* | *'"rm '* | *' rm '* | *';rm '* | *'&rm '* | *'|rm '*)
	echo "rm is not allowed here: move files into ./trash instead, or ask the user to delete them." >&2
	exit 2
	;;
esac
exit 0
