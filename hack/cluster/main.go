package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Main runs hack/cluster.sh's command line args in the checkout repoRoot and returns the
// exit code: 0, 1 on failure, 2 for a usage error, 3 from status when nothing runs.
func Main(ctx context.Context, repoRoot string, args []string, stdout, stderr io.Writer) int {
	red, reset := "", ""
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			red, reset = "\x1b[31m", "\x1b[0m"
		}
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%serror:%s %v\n", red, reset, err)
		var exitErr *ExitError
		if errors.As(err, &exitErr) {
			return exitErr.Code
		}
		return 1
	}
	c, inv, err := Command(repoRoot, args, stdout, stderr)
	if err != nil {
		return fail(err)
	}
	switch inv.Verb {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, Usage)
		return 0
	case "":
		fmt.Fprint(stderr, Usage)
		return 2
	}
	if err := c.Run(ctx, inv.Verb, inv.Args); err != nil {
		var exitErr *ExitError
		if errors.As(err, &exitErr) && exitErr.Quiet {
			return exitErr.Code
		}
		if strings.HasPrefix(err.Error(), "unknown command") {
			fmt.Fprint(stderr, Usage)
		}
		return fail(err)
	}
	return 0
}

// Command parses a hack/cluster.sh command line (with the environment of this process:
// METRICSCALE_CLUSTER_DIR, METRICSCALE_CACHE) and returns the cluster it names, for the
// checkout repoRoot, writing progress to out and warnings and failures to errOut.
func Command(repoRoot string, args []string, out, errOut io.Writer) (*Cluster, Invocation, error) {
	cacheRoot, err := DefaultCacheRoot(os.Getenv)
	if err != nil {
		return nil, Invocation{}, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, Invocation{}, err
	}
	inv, err := ParseArgs(args, os.Getenv, filepath.Join(cacheRoot, "cluster"), cwd)
	if err != nil {
		return nil, inv, err
	}
	c, err := New(repoRoot, cacheRoot, inv.Options, out, errOut)
	return c, inv, err
}

// Run runs one verb of hack/cluster.sh with its other arguments (kubectl's, a backend's name).
func (c *Cluster) Run(ctx context.Context, verb string, args []string) error {
	switch verb {
	case "up":
		return c.Up(ctx)
	case "down":
		return c.Down(ctx)
	case "status":
		return c.Status(ctx)
	case "env":
		env, err := c.Env()
		if err != nil {
			fmt.Fprintf(c.Err, "# %v\n", err)
			return &ExitError{Code: 1, Err: err, Quiet: true}
		}
		for _, v := range env {
			fmt.Fprintf(c.Out, "export %s=%s\n", v.Name, singleQuote(v.Value))
		}
		return nil
	case "kubectl":
		return c.execKubectl(args, c.Out, c.Err)
	case "build":
		c.upStart = time.Now()
		c.phaseBegin("build binaries (cache: " + c.Bin + ")")
		names := c.buildModules()
		switch {
		case c.ForUp && len(args) > 0:
			return errors.New("build: give --for-up or module names, not both")
		case c.ForUp:
			names = c.neededModules()
		case len(args) > 0:
			names = args
		}
		if err := c.Build(ctx, names...); err != nil {
			return err
		}
		c.phaseEnd("build")
		return nil
	case "load-images":
		return c.LoadImages(ctx, args...)
	case "restart-autoscaler":
		return c.RestartAutoscaler(ctx, c.ChangeFeedURL)
	case "install-prometheus":
		return c.InstallPrometheus(ctx)
	case "stop-prometheus":
		return c.StopPrometheus(ctx)
	case "start-prometheus":
		return c.StartPrometheus(ctx)
	case "install-backends":
		return c.InstallBackends(ctx)
	case "stop-backend", "start-backend":
		if len(args) != 1 {
			return fmt.Errorf("usage: hack/cluster.sh %s NAME", verb)
		}
		if verb == "stop-backend" {
			return c.StopBackend(ctx, args[0])
		}
		return c.StartBackend(ctx, args[0])
	}
	return fmt.Errorf("unknown command: %s", verb)
}
