//go:build unix && !linux

package subprocess

// mapPopulate: other systems fault the mapping in page by page.
const mapPopulate = 0
