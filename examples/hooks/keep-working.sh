#!/bin/sh
# A run_end hook that does not let a run end before a file exists
# (keep-working.yaml): while the file --file=PATH names is missing, it
# answers block, and the run goes on with the reason as the next user
# message, at most limits.max_continuations times. (The path is not an
# argument of its own: an argument naming an existing file is one of the
# kernel's files, which no tool may write.) Shell built-ins only.
IFS= read -r input
file=${1#--file=}
case "$input" in
*'"stop_reason":"completed"'*) ;;
*) exit 0 ;; # only a completed run can go on
esac
if [ -e "$file" ]; then
	printf '{"decision":"allow","note":"%s exists"}\n' "$file"
else
	printf '{"decision":"block","reason":"%s does not exist yet, so the task is not done: create it, then answer."}\n' "$file"
fi
