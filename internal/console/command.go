package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackwright/stackwright/internal/kubectlplugin"
)

// DefaultAddress is where the console listens unless told otherwise: the loopback
// interface, on a port the system picks.
const DefaultAddress = "127.0.0.1:0"

// shutdownGrace is how long open requests (the event streams, mostly) get to end once the
// command is interrupted.
const shutdownGrace = 2 * time.Second

// Command is `kubectl stackwright ui`, for kubectlplugin.NewCommand's extra commands.
func Command(connect func() (*kubectlplugin.Env, error)) *cobra.Command {
	var address string
	var noBrowser bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web console on the loopback interface, with your kubeconfig's credentials",
		Long: "Serve the web console (fleet, Stacks, Updates and their logs, plans to approve or reject,\n" +
			"rollouts, templates) on the loopback interface until interrupted. Every read and write is\n" +
			"yours, with your kubeconfig's credentials. Open the printed address: its token is the key.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var open func(string) error
			if !noBrowser {
				open = openBrowser
			}
			return Serve(ctx, env, address, cmd.OutOrStdout(), open)
		},
	}
	cmd.Flags().StringVar(&address, "address", DefaultAddress, "Loopback address and port to listen on (port 0: any free port)")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "Only print the console's address; do not open a browser")
	return cmd
}

// Serve serves the console for env at address until ctx ends. It prints the address to
// open on out, and opens it with open unless open is nil.
func Serve(ctx context.Context, env *kubectlplugin.Env, address string, out io.Writer, open func(string) error) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("failed to read address %q: %w", address, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("the console serves on a loopback address only (such as %s), not %q", DefaultAddress, host)
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", address, err)
	}
	s, err := New(env, ln.Addr())
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			_ = srv.Close() // the streams that did not end in time
		}
	}()
	fmt.Fprintf(out, "Stackwright console (Ctrl-C to stop); open:\n  %s\n", s.URL())
	if open != nil {
		if err := open(s.URL()); err != nil {
			fmt.Fprintf(out, "(no browser opened: %v)\n", err)
		}
	}
	err = srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return fmt.Errorf("failed to serve the console: %w", err)
}

// openBrowser opens url in the desktop's browser, where there is one.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return errors.New("no display")
		}
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reaped; whether the browser came up is its business
	return nil
}
