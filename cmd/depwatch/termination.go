package main

import (
	"os"
)

// terminationLogPath is where the kubelet reads a container's termination message from, so
// `kubectl describe pod` shows what a Job's run did or why it refused to start.
var terminationLogPath = "/dev/termination-log"

// writeTerminationMessage writes msg only when the file already exists: inside a pod the
// kubelet mounts it; outside one we must not create files under /dev.
func writeTerminationMessage(msg string) {
	f, err := os.OpenFile(terminationLogPath, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	defer f.Close()
	// The kubelet keeps at most 4096 bytes of it.
	if len(msg) > 4000 {
		msg = msg[:4000]
	}
	_, _ = f.WriteString(msg + "\n")
}
