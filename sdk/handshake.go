package sdk

import plugin "github.com/hashicorp/go-plugin"

// ProtocolVersion is the version of the tool protocol (pluginpb) this SDK
// speaks, negotiated in go-plugin's handshake. A host refuses a plugin whose
// version it does not know, with an error that says to rebuild the plugin
// against a compatible SDK.
const ProtocolVersion = 1

// Version is the SDK's version, reported by Describe for diagnostics.
const Version = "0.1.0"

// PluginName is the key of the tool service in go-plugin's plugin set.
const PluginName = "tools"

// The magic cookie go-plugin uses to tell a plugin it was started by a host.
// It is not a secret and not a security measure: a binary run by hand
// prints a friendly message and exits.
const (
	MagicCookieKey   = "AGENTKERNEL_PLUGIN"
	MagicCookieValue = "7c0b3f4e-agentkernel-tools"
)

// Handshake returns the go-plugin handshake both sides must agree on.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}
