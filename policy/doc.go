// Package policy implements kernel.Policy with rules written as expr-lang
// expressions in a YAML file: which tools the model is offered in each
// generation (surfaces), what happens to each call (deny, ask, allow) and
// when a run must stop (budgets). It also provides what policy authors need
// to work on such a file: compile errors that point at a line and column,
// lint, the file's own tests, explanations of a decision and a replay of a
// stored session under a new policy. The file format is documented in
// docs/policy.md and schemas/policy.schema.json.
//
// Loading a policy (Load, LoadFile):
//
//  1. Parse the YAML strictly: unknown fields, duplicate keys and wrong
//     types are errors with their line and column.
//  2. Compile every expression against Env, a Go struct with closed keys,
//     with the file's vars (v.<name>) and budget constants (budget.<name>)
//     inlined: a misspelt field is a compile error, never a silent nil.
//  3. Lint: duplicate ids, tools that are not registered (Options.Tools),
//     rules that can never decide anything.
//  4. Run the file's tests (in parallel, each evaluating only the rules
//     the index finds can match its call), and require that every rule,
//     select rule, drop rule and budget is exercised by one. With
//     Options.Cache, a file that passed them before, unchanged, under the
//     same build and tools, skips this step (see VerdictCache).
//
// Only a file that passes all four becomes a *Policy; anything else is a
// *LoadError listing every problem. A file the cache vouches for skips
// steps 1 to 3 as well: the cache keeps a snapshot of what they built, and
// the policy compiles each expression when it is first evaluated. A *Policy never changes; a Watcher
// serves the current policy of a file and swaps in a new one, atomically,
// when the file changes or on request, keeping the last good policy when a
// new version does not load.
//
// Deciding (Decide): deny > ask > allow > defaults.tool_call. An error in a
// deny or ask rule counts as a match (fail closed), in an allow rule as no
// match. Rules in mode dryrun are evaluated and reported as would_deny or
// would_ask, and never act. Rules are indexed by the tool names they can
// apply to and by their guards (a first condition of the forms x == c,
// x in [...], x startsWith "p", x matches "^p..."), so a decision costs
// what the rules that can match the call cost.
//
// Changing a policy (Diff): re-decide recorded sessions under an old and a
// new file, with the state each call saw, and report the calls and
// surfaces that change and each file's coverage.
package policy
