package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/serve"
)

// cmdServe is `kernel serve`: the same configuration, policy, tools, hooks
// and store as `kernel run`, served over HTTP to many clients at once
// (docs/serve.md).
func cmdServe(ctx context.Context, args []string, env *cliEnv) error {
	fs := newFlagSet("serve", "", env.stderr)
	var cf commonFlags
	cf.register(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "`ADDRESS` to listen on (host:port); a non-loopback address needs --tls-cert and --tls-key, or --insecure-listen")
	certFile := fs.String("tls-cert", "", "TLS certificate `FILE` (PEM): serve HTTPS")
	keyFile := fs.String("tls-key", "", "TLS private key `FILE` (PEM)")
	insecure := fs.Bool("insecure-listen", false, "accept the risk of plain HTTP on a non-loopback address (keys and prompts cross the network unencrypted)")
	keys := fs.String("keys", "", "API key `FILE` (default: beside the session store, STORE-keys.json; kernel keys manages it)")
	drain := fs.Duration("drain-timeout", 30*time.Second, "on SIGTERM, how long runs get to reach a step boundary before they are cancelled")
	autoResume := fs.Bool("auto-resume", false, "continue, at start, the runs a previous server left interrupted")
	lim := serve.DefaultLimits()
	maxRuns := fs.Int("max-runs", lim.MaxRuns, "runs in flight at once, all keys together (more: 429)")
	maxRunsKey := fs.Int("max-runs-per-key", lim.MaxRunsPerKey, "runs in flight at once for one key (more: 429)")
	maxBody := fs.Int64("max-body", lim.MaxBodyBytes, "largest request body in `BYTES` (more: 413)")
	accessLog := fs.String("access-log", "-", "access log `FILE` (JSON lines; - for stderr, empty for none)")
	replicaName := fs.String("replica", "", "this server's `NAME` among the replicas sharing a postgres store (default HOST-PID-RANDOM)")
	leaseTTL := fs.Duration("lease-ttl", 15*time.Second, "postgres store: how long a session's lease lasts unrenewed; a stopped replica's sessions are taken over (--auto-resume) or shown interrupted after it")
	poll := fs.Duration("poll", time.Second, "postgres store: how often to look at the database for what notices missed and for sessions to take over")
	var guard serveGuardFlags
	guard.register(fs, lim)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("serve takes no arguments (got %q)", strings.Join(pos, " "))
	}
	if err := checkListen(*listen, *certFile, *keyFile, *insecure); err != nil {
		return err
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	if cfg.keysFile, err = cfg.keysPath(*keys); err != nil {
		return err
	}
	if err := cfg.checkProtected(); err != nil {
		return err
	}
	cfg.spanExporter = env.spans
	a, err := newApp(ctx, cfg, env.stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	a.serverStore = true
	if err := a.openStore(false); err != nil {
		return err
	}
	if *leaseTTL < 100*time.Millisecond || *poll <= 0 {
		return usageError("--lease-ttl must be at least 100ms and --poll positive")
	}
	a.replica = *replicaName
	if _, shared := a.store.(replica.Shared); shared && a.replica == "" {
		host, _ := os.Hostname()
		a.replica = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), kernel.NewID()[:6])
	}
	if err := a.requireStoreSpace(); err != nil {
		return err
	}
	if err := a.watchConfig(); err != nil {
		return err
	}
	prov, err := a.provider()
	if err != nil {
		return err
	}
	// Runs send their events to their sessions' streams (Kernel.With);
	// what is left here is the server's own: policy reloads and notices.
	k, err := a.kernel(prov, func(e kernel.Event) {
		if n, ok := e.(kernel.Notice); ok {
			fmt.Fprintf(env.stderr, "kernel serve: %s: %s\n", n.Level, scrubText(n.Text))
		}
		if r, ok := e.(kernel.ConfigReloaded); ok {
			fmt.Fprintf(env.stderr, "kernel serve: %s reloaded from %s (revision %s) %s\n", r.What, r.Source, r.Revision, scrubText(r.Error))
		}
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.cfg.applyPrestart(ctx))
	ks, err := serve.OpenKeys(cfg.keysFile, func(msg string) { fmt.Fprintf(env.stderr, "kernel serve: warning: %s\n", msg) })
	if err != nil {
		return err
	}
	var access io.Writer
	switch *accessLog {
	case "":
	case "-":
		access = env.stderr
	default:
		f, err := openPrivate(*accessLog, true)
		if err != nil {
			return fmt.Errorf("--access-log: %w", err)
		}
		defer f.Close()
		access = f
	}
	var tlsConfig *tls.Config
	var cert *tls.Certificate
	if *certFile != "" {
		c, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cert = &c
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}
	}
	srv, err := serve.New(serve.Config{
		Kernel: k, Store: a.store, Queue: a.queue, Keys: ks, Policy: a.policyWatcher, Agents: a.serveAgents(),
		SessionContext: a.sessionContext(), Memory: a.memorySearcher(),
		Scrub: a.redact, AccessLog: access, ErrorLog: scrubWriter{env.stderr},
		Limits:       guard.limits(*maxRuns, *maxRunsKey, *maxBody),
		DrainTimeout: *drain, AutoResume: *autoResume, Version: buildVersion().Version,
		Replica: a.replica, LeaseTTL: *leaseTTL, Poll: *poll, AllowedHosts: guard.allowedHosts(*listen, cert),
	})
	if err != nil {
		return err
	}
	a.mountMetrics(srv, ks)
	if err := a.serveMetrics(ctx, env.stderr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	n, _ := ks.List()
	active := 0
	for _, k := range n {
		if k.Active() {
			active++
		}
	}
	fmt.Fprintf(env.stderr, "kernel serve: listening on %s://%s (the approvals inbox is at /, the API under /v1; %d active keys in %s)\n", scheme, ln.Addr(), active, cfg.keysFile)
	if ps, ok := a.store.(*postgres.Store); ok {
		fmt.Fprintf(env.stderr, "kernel serve: replica %s of the sessions in PostgreSQL %s (lease ttl %s)\n", a.replica, ps.Where(), *leaseTTL)
	}
	if active == 0 {
		fmt.Fprintf(env.stderr, "kernel serve: no API keys yet: create one with  kernel keys create NAME --scopes run,read,approve%s\n", keysFlagHint(cf, *keys))
	}
	for _, n := range a.warnings {
		fmt.Fprintf(env.stderr, "warning: %s\n", n.Text)
	}
	start := time.Now()
	err = srv.Serve(ctx, ln, tlsConfig)
	if ctx.Err() != nil {
		fmt.Fprintf(env.stderr, "kernel serve: drained in %s\n", time.Since(start).Round(time.Millisecond))
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// checkListen refuses a non-loopback address without TLS unless the risk
// is accepted.
func checkListen(addr, cert, key string, insecure bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError("--listen %q: want host:port, e.g. 127.0.0.1:8080", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usageError("--listen %q: the port must be a number", addr)
	}
	if (cert == "") != (key == "") {
		return usageError("--tls-cert and --tls-key go together")
	}
	if cert != "" || insecure {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usageError("--listen %s is not a loopback address: API keys and prompts would cross the network in clear text; serve TLS (--tls-cert FILE --tls-key FILE), or accept the risk with --insecure-listen (e.g. behind a TLS proxy on the same host)", addr)
}

// keysPath is the API key file: --keys, else beside the session store.
func (cfg *Config) keysPath(flag string) (string, error) {
	if flag != "" {
		return absPath(flag), nil
	}
	sc, err := cfg.storeConfig()
	if err != nil {
		return "", err
	}
	if sc.Kind == "memory" {
		return "", usageError("a memory store has no place for API keys: pass --keys FILE")
	}
	if sc.Kind == "postgres" {
		return "", usageError("the postgres store keeps no API keys: pass --keys FILE (every replica needs the same file)")
	}
	return filepath.Join(filepath.Dir(sc.Dir), filepath.Base(sc.Dir)+"-keys.json"), nil
}

func keysFlagHint(cf commonFlags, keys string) string {
	var b strings.Builder
	for _, c := range cf.config {
		b.WriteString(" --config " + c)
	}
	if cf.store != "" {
		b.WriteString(" --store " + cf.store)
	}
	if keys != "" {
		b.WriteString(" --keys " + keys)
	}
	return b.String()
}
