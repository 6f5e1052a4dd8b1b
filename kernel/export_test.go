package kernel

// What the tests of package kernel_test reach inside the kernel for.

// CountRequest counts a request's tokens from scratch (countRequest): the
// tests check the incremental count against it.
var CountRequest = countRequest

// Calibration returns the ratio the kernel has learnt for model: reported
// prompt tokens over the estimate (1 when the model has a tokenizer or no
// usage has been reported yet).
func (k *Kernel) Calibration(model string) float64 { return k.calib.get(model) }

// FirstCall predicts the cost and tokens of the first model call of a
// child run of k given task (what a parent's ledger admits it at).
func (k *Kernel) FirstCall(task string) (float64, int64) {
	return k.firstCall(agentArgs{Task: task}.prompt())
}

// FirstRoom returns the room, in messages, a new session's history would
// get now (room.go), system message included.
func (k *Kernel) FirstRoom() int {
	sys := 0
	if k.cfg.SystemPrompt != "" {
		sys = 1
	}
	return k.rooms.room(sys)
}
