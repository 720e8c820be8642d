package process

import (
	"bytes"
	"os/exec"
	"testing"
)

// TestCmdlineRightAfterStart: the arguments are read at once after Start, which returns
// while the child may still be in execve (the read that TestDaemon once failed on in CI).
func TestCmdlineRightAfterStart(t *testing.T) {
	t.Parallel()
	for i := range 50 {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		b, err := Cmdline(cmd.Process.Pid)
		alive := Alive(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil || !bytes.Equal(b, []byte("sleep\x00600\x00")) {
			t.Fatalf("start %d: cmdline %q, %v; want sleep 600", i, b, err)
		}
		if !alive {
			t.Fatalf("start %d: Alive = false for a running sleep", i)
		}
		if Alive(cmd.Process.Pid) {
			t.Fatalf("start %d: Alive = true after the process was reaped", i)
		}
	}
}
