package config

import "github.com/agentkernel/agentkernel/internal/config/names"

// NameRule is the syntax of one kind of name (names.Rule).
type NameRule = names.Rule

// The name rules of the kernel, from package names.
var (
	ToolName       = names.ToolName
	PluginToolName = names.PluginToolName
	Namespace      = names.Namespace
	ModuleName     = names.ModuleName
	HookName       = names.HookName
)
