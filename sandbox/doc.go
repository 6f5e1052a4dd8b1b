// Package sandbox confines native processes: run_command's programs,
// subprocess plugins, command hooks and MCP stdio servers all start
// through Command (by way of their one owner, sandbox/proc), with a Grant
// saying what they may do.
//
// The launcher is the kernel binary itself, re-executed as the sandbox's
// init. Lifecycle of one confined process:
//
//  1. Command checks the grant, checks that the layers it needs exist on
//     this machine (Check; MissingLayerError otherwise, unless the grant's
//     AllowMissing accepts the risk) and returns a Cmd that re-executes
//     /proc/self/exe in new user, PID, IPC, mount and (without net)
//     network namespaces.
//  2. Main, called first in the binary's main, recognises the launcher,
//     puts itself out of the program's reach (not dumpable, fatal signals
//     caught), builds the file system view (a new root holding only the
//     granted paths, a fresh /proc and a private /tmp; view_linux.go),
//     bounds the processes, sets the rlimits, drops every capability,
//     sets no_new_privs, applies Landlock (files, TCP ports, signal and
//     abstract-socket scopes) and installs the seccomp filter
//     (seccomp_linux.go).
//  3. The launcher starts the program as its child, in the sandbox's
//     memory and pids cgroups (cgroup_linux.go), reaps everything,
//     watches which limit is being approached, and when the program exits
//     reports the Outcome and exits with the program's status; the kernel
//     then kills every process left in the PID namespace.
//  4. Cmd.Wait returns the program's exit error, or a *LimitError naming
//     the limit (cpu, memory_mb, max_procs, max_file_mb, timeout) that
//     stopped it.
package sandbox
