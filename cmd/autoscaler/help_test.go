package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/metricscale/metricscale/autoscaler/app"
)

// controllerFlags is main's flag set.
func controllerFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
	app.NewOptions().AddFlags(fs)
	fs.Bool("version", false, "print the version and exit")
	return fs
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		args       []string
		controller bool // the controller is to run: dispatch did nothing
		wantCode   int
		wantOut    []string
		wantStderr string
	}{
		{name: "no arguments: the controller", args: nil, controller: true},
		{name: "flags: the controller", args: []string{"--kubeconfig", "x"}, controller: true},
		{name: "help lists every subcommand", args: []string{"help"}, wantOut: []string{"simulate ", "record ", "convert ", "help ", "Controller flags:", "--kubeconfig"}},
		{name: "help help", args: []string{"help", "help"}, wantOut: []string{"Subcommands:"}},
		{name: "help convert", args: []string{"help", "convert"}, wantOut: []string{"autoscaler convert keda", "Exit status"}},
		{name: "help simulate: its flags on stdout", args: []string{"help", "simulate"}, wantOut: []string{"Usage: autoscaler simulate", "--explain"}},
		{name: "help record", args: []string{"help", "record"}, wantOut: []string{"Usage: autoscaler record", "--last"}},
		{name: "help of an unknown subcommand", args: []string{"help", "simulat"}, wantCode: 2, wantStderr: `unknown subcommand "simulat"`},
		{name: "help with two words", args: []string{"help", "simulate", "record"}, wantCode: 2, wantStderr: "at most one subcommand"},
		{name: "an unknown subcommand is an error, not the controller", args: []string{"convrt", "keda"}, wantCode: 2, wantStderr: `unknown subcommand "convrt" (subcommands: simulate, record, convert, help`},
		{name: "simulate --help", args: []string{"simulate", "--help"}, wantStderr: "Usage: autoscaler simulate"},
		{name: "convert runs", args: []string{"convert"}, wantCode: 2, wantStderr: "autoscaler convert hpa"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code, ran := dispatch(context.Background(), tc.args, controllerFlags(), strings.NewReader(""), &out, &errOut)
			if ran == tc.controller {
				t.Fatalf("dispatch ran a subcommand: %v, want %v", ran, !tc.controller)
			}
			if tc.controller {
				return
			}
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.wantCode, errOut.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout %q, want it to contain %q", out.String(), w)
				}
			}
			if tc.wantStderr == "" && errOut.Len() > 0 || !strings.Contains(errOut.String(), tc.wantStderr) {
				t.Errorf("stderr %q, want %q", errOut.String(), tc.wantStderr)
			}
		})
	}
}

func TestParseControllerFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		args       []string
		wantExit   bool
		wantCode   int
		wantOut    string
		wantStderr string
	}{
		{name: "flags: run", args: []string{"--bind-address", ":8080"}},
		{name: "--help: the subcommands and the flags on stdout, exit 0", args: []string{"--help"}, wantExit: true, wantOut: "  convert    turn HPAs"},
		{name: "-h", args: []string{"-h"}, wantExit: true, wantOut: "  simulate   replay a scenario"},
		{name: "an unknown flag", args: []string{"--nope"}, wantExit: true, wantCode: 2, wantStderr: "unknown flag: --nope"},
		{name: "an argument after flags", args: []string{"--bind-address", ":8080", "simulate"}, wantExit: true, wantCode: 2, wantStderr: `unexpected argument "simulate"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code, exit := parseControllerFlags(controllerFlags(), tc.args, &out, &errOut)
			if exit != tc.wantExit || code != tc.wantCode {
				t.Fatalf("exit %v code %d, want %v %d (stderr %q)", exit, code, tc.wantExit, tc.wantCode, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout %q, want %q", out.String(), tc.wantOut)
			}
			if tc.wantStderr == "" && errOut.Len() > 0 || !strings.Contains(errOut.String(), tc.wantStderr) {
				t.Errorf("stderr %q, want %q", errOut.String(), tc.wantStderr)
			}
		})
	}
}
