package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

// subcommand is one of the commands besides the controller.
type subcommand struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// subcommands are listed by --help in this order.
var subcommands = []subcommand{
	{name: "simulate", summary: "replay a scenario file through the decision core, without a cluster", run: simulate},
	{name: "record", summary: "fetch a live MetricAutoscaler's recent reconciles as a scenario to replay", run: func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return recordCommand(ctx, args, stdout, stderr)
	}},
	{name: "convert", summary: "turn HPAs (convert hpa) and KEDA ScaledObjects (convert keda) into MetricAutoscalers", run: func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return convertCmd(ctx, args, stdin, stdout, stderr)
	}},
	{name: "help", summary: "print this help, or a subcommand's: help SUBCOMMAND"},
}

// dispatch runs the subcommand args name; false when args are the
// controller's (none, or flags first), which main then runs.
func dispatch(ctx context.Context, args []string, fs *pflag.FlagSet, stdin io.Reader, stdout, stderr io.Writer) (int, bool) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return 0, false
	}
	if args[0] == "help" {
		return help(ctx, args[1:], fs, stdin, stdout, stderr), true
	}
	for _, s := range subcommands {
		if s.name == args[0] && s.run != nil {
			return s.run(ctx, args[1:], stdin, stdout, stderr), true
		}
	}
	// the controller takes no arguments: a word first is a mistyped
	// subcommand, not a controller to start
	fmt.Fprintf(stderr, "autoscaler: unknown subcommand %q (subcommands: %s; the controller takes flags only, see autoscaler --help)\n", args[0], subcommandNames())
	return exitUsage, true
}

// help is `autoscaler help [SUBCOMMAND]`, on standard output.
func help(ctx context.Context, args []string, fs *pflag.FlagSet, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		printUsage(stdout, fs)
		return 0
	case len(args) > 1:
		fmt.Fprintln(stderr, "autoscaler help: at most one subcommand")
		return exitUsage
	case args[0] == "convert":
		fmt.Fprint(stdout, convertUsage)
		return 0
	}
	for _, s := range subcommands {
		if s.name == args[0] && s.run != nil {
			return s.run(ctx, []string{"--help"}, stdin, stdout, stdout)
		}
	}
	if args[0] == "help" {
		printUsage(stdout, fs)
		return 0
	}
	fmt.Fprintf(stderr, "autoscaler help: unknown subcommand %q (subcommands: %s)\n", args[0], subcommandNames())
	return exitUsage
}

// printUsage is autoscaler --help: the subcommands, then the
// controller's flags.
func printUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprint(w, "Usage:\n  autoscaler [flags]                 run the autoscaler controller\n  autoscaler SUBCOMMAND [args]\n\nSubcommands:\n")
	for _, s := range subcommands {
		fmt.Fprintf(w, "  %-10s %s\n", s.name, s.summary)
	}
	fmt.Fprint(w, "\nautoscaler help SUBCOMMAND (or SUBCOMMAND --help) prints its flags.\n\nController flags:\n")
	fmt.Fprint(w, fs.FlagUsages())
}

func subcommandNames() string {
	names := make([]string, len(subcommands))
	for i, s := range subcommands {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// parseControllerFlags parses the controller's flags; exit says to stop
// with code: --help (0, the usage on stdout), a bad flag or an argument
// (2, on stderr).
func parseControllerFlags(fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) (code int, exit bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, on the stream it belongs to
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		printUsage(stdout, fs)
		return 0, true
	case err != nil:
		fmt.Fprintf(stderr, "autoscaler: %v (autoscaler --help lists the flags and subcommands)\n", err)
		return exitUsage, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "autoscaler: unexpected argument %q: the controller takes flags only; subcommands come first (%s)\n", fs.Arg(0), subcommandNames())
		return exitUsage, true
	}
	return 0, false
}
