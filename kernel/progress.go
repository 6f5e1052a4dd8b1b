package kernel

// turnsSinceUser counts the model turns (assistant messages) after the
// last user message: the turns a prompt has had so far. A run resumed by an
// approval numbers its progress on from them, so the counter does not
// restart at [1/N] in the middle of one prompt's work.
func (r *run) turnsSinceUser() int {
	n := 0
	for i := len(r.msgs) - 1; i >= r.sysN; i-- {
		switch r.msgs[i].Role {
		case RoleUser:
			return n
		case RoleAssistant:
			n++
		}
	}
	return n
}
