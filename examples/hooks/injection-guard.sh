#!/bin/sh
# A prompt-injection guardrail: a before_model hook that runs beside the
# model call (concurrent: true in guardrail.yaml). It reads the request
# about to be sent, one line of JSON on stdin, and blocks it when a
# message asks the model to drop its instructions: the kernel cancels the
# model call in flight, no tool runs, and the run stops as guardrail.
# Shell built-ins only, so it needs no environment.
IFS= read -r input
case "$input" in
*[Ii]gnore\ all\ previous\ instructions* | *[Ii]gnore\ previous\ instructions* | \
	*[Ii]gnore\ your\ instructions* | *[Dd]isregard\ your\ instructions* | *[Dd]isregard\ all\ previous*)
	printf '%s\n' '{"decision":"block","reason":"the request looks like a prompt injection: it asks the model to ignore its instructions"}'
	;;
*)
	printf '%s\n' '{"decision":"allow"}'
	;;
esac
