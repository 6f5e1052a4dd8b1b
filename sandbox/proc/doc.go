// Package proc owns every native process the kernel starts: run_command's
// programs, command hooks, subprocess plugins and MCP stdio servers. The
// way go-plugin's internal/cmdrunner owns its plugins' processes, it is
// the one place that starts, confines, kills and reaps them, so they all
// behave the same way:
//
//  1. Start builds the process from a Spec: the program confined by
//     package sandbox under its grant (a pre-started launcher for short,
//     frequent programs), an environment of the allowlisted variables only
//     (Env), and output copied from pipes the process owns. The sandbox's
//     launcher leads a process group of its own and is PID 1 of the
//     program's namespaces. (Command builds the same process for a library
//     that starts the *exec.Cmd itself, as the MCP SDK's transport does.)
//  2. Kill, or the Spec's context ending, kills that whole group
//     (KillGroup): the launcher, and with it everything the program
//     started.
//  3. The process is reaped as soon as it exits: on Linux the group is
//     killed while the exited launcher still holds its pid, so the group
//     id cannot have been reused by then. Done is closed.
//  4. Wait returns once the output pipes are drained too, or PipeGrace
//     after the process is gone (only a process that escaped the group
//     could hold them), with an Exit that says how the process ended: its
//     exit code, the sandbox limit that stopped it, the signal, or why
//     the sandbox did not start it.
package proc
