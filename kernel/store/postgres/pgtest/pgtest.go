// Package pgtest starts a real PostgreSQL server for tests and
// benchmarks: Debian's postgresql package's initdb and postgres, in a
// temporary directory, on a free loopback port, as an unprivileged user
// when the tests run as root (PostgreSQL refuses to run as root). One
// server serves a test binary (Shared starts it on first use; Main in
// TestMain stops it); each test gets a database of its own.
//
// The server is a child of the test process that the kernel kills if the
// test process dies (Linux's parent-death signal), so a killed `go test`
// leaves no server behind. `make test` installs the package when it is
// missing; a test that needs the server and cannot start it fails under
// AGENTKERNEL_REQUIRE_ARTIFACTS=1 and is skipped otherwise.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel/store/postgres"
)

// Options configures Start.
type Options struct {
	// Durable keeps fsync on: a commit waits for the disk, as in
	// production (benchmarks measure that cost). Without it commits wait
	// for the operating system only, which survives a kill of the server
	// but not of the machine.
	Durable bool
}

// Server is a running PostgreSQL server.
type Server struct {
	dir      string
	bin      string
	opts     Options
	port     int
	password string
	cmd      *exec.Cmd
	exited   chan struct{}
	n        atomic.Int64
	drops    sync.WaitGroup

	tplOnce sync.Once
	tpl     string // the migrated database Migrated copies
	tplErr  error

	stopOnce sync.Once
	stopErr  error
}

// Superuser is the name of the server's superuser.
const Superuser = "ak"

// Bin returns the directory of PostgreSQL's server binaries:
// $AGENTKERNEL_PG_BIN, else the newest /usr/lib/postgresql/*/bin, else
// where initdb is on PATH.
func Bin() (string, error) {
	if d := os.Getenv("AGENTKERNEL_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL's server binaries (initdb, postgres) are not installed: apt-get install postgresql (make test installs it)")
}

// runAs returns the credential the server runs with: none when the tests
// do not run as root, else the postgres user (Debian's package creates
// it), else nobody.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("the tests run as root and there is neither a postgres nor a nobody user to run PostgreSQL as")
}

// Start initialises a cluster in a new temporary directory and starts the
// server on a free loopback port. The superuser (Superuser) has a random
// password; connections over TCP must give it.
func Start(o Options) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "agentkernel-pg-")
	if err != nil {
		return nil, err
	}
	var rnd [12]byte
	rand.Read(rnd[:])
	s := &Server{dir: dir, bin: bin, opts: o, password: hex.EncodeToString(rnd[:]), exited: make(chan struct{})}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(s.password+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if cred != nil {
		if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, int(cred.Uid), int(cred.Gid))
		}); err != nil {
			return fail(err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", Superuser, "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	dieWithParent(initdb.SysProcAttr)
	var initOut bytes.Buffer
	initdb.Stdout, initdb.Stderr = &initOut, &initOut
	initExited := make(chan struct{})
	err = startOwnThread(initdb, initExited)
	if err == nil {
		<-initExited
		if !initdb.ProcessState.Success() {
			err = errors.New(initdb.ProcessState.String())
		}
	}
	if out := initOut.Bytes(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	os.Remove(pwfile)
	for attempt := 0; ; attempt++ {
		err := s.start(cred, 0)
		if err == nil {
			return s, nil
		}
		if attempt == 4 {
			return fail(err)
		}
	}
}

// start runs the server on port (a free one when 0) and waits until it
// answers.
func (s *Server) start(cred *syscall.Credential, port int) error {
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	s.port = port
	args := []string{"-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=64MB"}
	if !s.opts.Durable {
		// Commits still wait for their WAL to be written (to the page
		// cache): what the server acknowledged survives the server's
		// kill (Kill), though not the machine's.
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	// Its own process group: Kill takes the backends down with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	exited := make(chan struct{})
	if err := startOwnThread(cmd, exited); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres exited: %s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("postgres did not answer within 60s: %v\n%s", err, log.String())
		}
	}
}

// startOwnThread starts cmd from a goroutine locked to its OS thread and
// waits for it there, closing exited when it ends. Pdeathsig belongs to
// the thread that forked, not the process: started from an ordinary
// goroutine, the server died whenever the runtime retired that thread
// (a test that locked it and returned), and every later test of the
// package found "connection refused".
func startOwnThread(cmd *exec.Cmd, exited chan struct{}) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the process
		if err := cmd.Start(); err != nil {
			errc <- err
			return
		}
		errc <- nil
		cmd.Wait()
		close(exited)
	}()
	return <-errc
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// DSN is the superuser's connection string for database db.
func (s *Server) DSN(db string) string {
	return s.UserDSN(Superuser, s.password, db)
}

// UserDSN is a connection string for database db as user with password.
func (s *Server) UserDSN(user, password, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: "127.0.0.1:" + strconv.Itoa(s.port), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Password is the superuser's password (tests check it never shows).
func (s *Server) Password() string { return s.password }

// Exec runs sql in database db as the superuser.
func (s *Server) Exec(db, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql, args...)
	return err
}

// CreateDatabase creates an empty database and returns its name.
func (s *Server) CreateDatabase() (string, error) { return s.createFrom("template1") }

func (s *Server) createFrom(template string) (string, error) {
	var rnd [4]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("t%d_%s", s.n.Add(1), hex.EncodeToString(rnd[:]))
	if err := s.Exec("postgres", "CREATE DATABASE "+name+" TEMPLATE "+template); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

// DropDatabase drops database name, closing its connections.
func (s *Server) DropDatabase(name string) error {
	return s.Exec("postgres", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

// NewDatabase creates an empty database for tb, dropped when tb ends, and
// returns its superuser DSN.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name, err := s.CreateDatabase()
	if err != nil {
		tb.Fatal(err)
	}
	s.dropLater(tb, name)
	return s.DSN(name)
}

// dropLater drops name when tb ends, in the background (the server's
// directory goes at Stop anyway; this only keeps the disk small).
func (s *Server) dropLater(tb testing.TB, name string) {
	tb.Cleanup(func() {
		s.drops.Add(1)
		go func() {
			defer s.drops.Done()
			s.DropDatabase(name)
		}()
	})
}

// Migrated is NewDatabase with the agentkernel schema applied (a copy of
// a database migrated once).
func (s *Server) Migrated(tb testing.TB) string {
	tb.Helper()
	s.tplOnce.Do(func() {
		var name string
		if name, s.tplErr = s.CreateDatabase(); s.tplErr != nil {
			return
		}
		if _, s.tplErr = postgres.Migrate(context.Background(), s.DSN(name), postgres.Options{}); s.tplErr == nil {
			s.tpl = name
		}
	})
	if s.tplErr != nil {
		tb.Fatal(s.tplErr)
	}
	name, err := s.createFrom(s.tpl)
	if err != nil {
		tb.Fatal(err)
	}
	s.dropLater(tb, name)
	return s.DSN(name)
}

// Stop shuts the server down (immediate shutdown: its data goes with its
// directory, which Stop removes; a kill after 10s).
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.drops.Wait()
		if s.cmd != nil {
			s.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-s.exited:
			case <-time.After(10 * time.Second):
				s.cmd.Process.Kill()
				<-s.exited
			}
		}
		s.stopErr = os.RemoveAll(s.dir)
	})
	return s.stopErr
}

// Kill stops the server at once (SIGKILL, as a crashed database host),
// keeping its directory: Restart starts it again on the same port.
func (s *Server) Kill() {
	if s.cmd != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
		s.cmd = nil
	}
}

// Restart starts a killed server again on the same port, with its data.
func (s *Server) Restart() error {
	cred, err := runAs()
	if err != nil {
		return err
	}
	return s.start(cred, s.port)
}

// The server of Shared, started by the first test that asks.
var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Main is a TestMain for a package whose tests use Shared: it runs the
// tests and stops the shared server, if one was started.
func Main(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops the server Shared started, if any (for a TestMain
// that cannot use Main).
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

// Shared returns the test binary's server, starting it on first use (one
// server for all the tests of a package: each takes a database of its
// own). Under AGENTKERNEL_REQUIRE_ARTIFACTS=1 (make test) a server that
// cannot start fails tb; otherwise it skips it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if s, _ := SharedServer(); s != nil {
		return s
	}
	if os.Getenv("AGENTKERNEL_REQUIRE_ARTIFACTS") != "" {
		tb.Fatalf("PostgreSQL: %v", sharedErr)
	}
	tb.Skipf("PostgreSQL: %v", sharedErr)
	return nil
}

// SharedServer is Shared for code without a testing.TB (an Example): the
// test binary's server, started on first use, or the error that kept it
// from starting. Main stops it; do not Stop it yourself.
func SharedServer() (*Server, error) {
	sharedOnce.Do(func() { shared, sharedErr = Start(Options{}) })
	return shared, sharedErr
}
