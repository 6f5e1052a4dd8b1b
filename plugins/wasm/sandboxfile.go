package wasm

import (
	"io"
	"os"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// rootFile is a file or directory opened through a rootFS. It wraps the
// *os.File that os.Root returned and never reopens anything by path (wazero's
// own file type reopens by host path to change the append flag or rewind a
// directory, which would step around the root). Not safe for concurrent use;
// wazero serialises calls per descriptor.
type rootFile struct {
	experimentalsys.UnimplementedFile
	f      *os.File
	name   string
	fs     *rootFS
	isDir  bool
	flag   experimentalsys.Oflag
	closed bool
}

func (f *rootFile) check(wantDir bool) experimentalsys.Errno {
	switch {
	case f.closed:
		return experimentalsys.EBADF
	case wantDir && !f.isDir:
		return experimentalsys.ENOTDIR
	case !wantDir && f.isDir:
		return experimentalsys.EISDIR
	}
	return 0
}

func (f *rootFile) writable() experimentalsys.Errno {
	if f.fs.readOnly {
		return experimentalsys.EROFS
	}
	if f.flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) == 0 {
		return experimentalsys.EBADF
	}
	return 0
}

// Dev implements experimentalsys.File.
func (f *rootFile) Dev() (uint64, experimentalsys.Errno) {
	st, en := f.Stat()
	return st.Dev, en
}

// Ino implements experimentalsys.File.
func (f *rootFile) Ino() (sys.Inode, experimentalsys.Errno) {
	st, en := f.Stat()
	return st.Ino, en
}

// IsDir implements experimentalsys.File.
func (f *rootFile) IsDir() (bool, experimentalsys.Errno) {
	if f.closed {
		return false, experimentalsys.EBADF
	}
	return f.isDir, 0
}

// IsAppend implements experimentalsys.File.
func (f *rootFile) IsAppend() bool { return f.flag&experimentalsys.O_APPEND != 0 }

// SetAppend implements experimentalsys.File with fcntl on the open
// descriptor, not by reopening the path.
func (f *rootFile) SetAppend(enable bool) experimentalsys.Errno {
	if en := f.check(false); en != 0 {
		return en
	}
	if enable && f.fs.readOnly {
		return experimentalsys.EROFS
	}
	var flags int
	err := f.control(func(fd uintptr) error {
		var e error
		flags, e = fcntl(fd, syscall.F_GETFL, 0)
		if e != nil {
			return e
		}
		if enable {
			flags |= syscall.O_APPEND
		} else {
			flags &^= syscall.O_APPEND
		}
		_, e = fcntl(fd, syscall.F_SETFL, flags)
		return e
	})
	if err != nil {
		return errno(err)
	}
	if enable {
		f.flag |= experimentalsys.O_APPEND
	} else {
		f.flag &^= experimentalsys.O_APPEND
	}
	return 0
}

func (f *rootFile) control(fn func(fd uintptr) error) error {
	rc, err := f.f.SyscallConn()
	if err != nil {
		return err
	}
	var inner error
	if err := rc.Control(func(fd uintptr) { inner = fn(fd) }); err != nil {
		return err
	}
	return inner
}

// Stat implements experimentalsys.File.
func (f *rootFile) Stat() (sys.Stat_t, experimentalsys.Errno) {
	if f.closed {
		return sys.Stat_t{}, experimentalsys.EBADF
	}
	st, err := f.f.Stat()
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(st), 0
}

// Read implements experimentalsys.File.
func (f *rootFile) Read(buf []byte) (int, experimentalsys.Errno) {
	if en := f.check(false); en != 0 {
		return 0, en
	}
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Read(buf)
	if err == io.EOF {
		err = nil
	}
	return n, errno(err)
}

// Pread implements experimentalsys.File.
func (f *rootFile) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if en := f.check(false); en != 0 {
		return 0, en
	}
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.ReadAt(buf, off)
	if err == io.EOF {
		err = nil
	}
	return n, errno(err)
}

// seekOffset is int64 under another name: Seek returns an errno, not an
// error, so it cannot have io.Seeker's signature, and go vet's stdmethods
// check only looks at methods whose first parameter is spelled int64.
type seekOffset = int64

// Seek implements experimentalsys.File. Seeking a directory to 0 rewinds it.
func (f *rootFile) Seek(offset seekOffset, whence int) (int64, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if f.isDir && (offset != 0 || whence != io.SeekStart) {
		return 0, experimentalsys.EISDIR
	}
	n, err := f.f.Seek(offset, whence)
	return n, errno(err)
}

// Readdir implements experimentalsys.File.
func (f *rootFile) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	if en := f.check(true); en != 0 {
		return nil, en
	}
	infos, err := f.f.Readdir(n)
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		return nil, errno(err)
	}
	out := make([]experimentalsys.Dirent, 0, len(infos))
	for _, fi := range infos {
		st := sys.NewStat_t(fi)
		out = append(out, experimentalsys.Dirent{Name: fi.Name(), Ino: st.Ino, Type: fi.Mode().Type()})
	}
	return out, 0
}

// Write implements experimentalsys.File.
func (f *rootFile) Write(buf []byte) (int, experimentalsys.Errno) {
	if en := f.check(false); en != 0 {
		return 0, en
	}
	if en := f.writable(); en != 0 {
		return 0, en
	}
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Write(buf)
	return n, errno(err)
}

// Pwrite implements experimentalsys.File.
func (f *rootFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if en := f.check(false); en != 0 {
		return 0, en
	}
	if en := f.writable(); en != 0 {
		return 0, en
	}
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.WriteAt(buf, off)
	return n, errno(err)
}

// Truncate implements experimentalsys.File.
func (f *rootFile) Truncate(size int64) experimentalsys.Errno {
	if en := f.check(false); en != 0 {
		return en
	}
	if en := f.writable(); en != 0 {
		return en
	}
	if size < 0 {
		return experimentalsys.EINVAL
	}
	return errno(f.f.Truncate(size))
}

// Sync implements experimentalsys.File.
func (f *rootFile) Sync() experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if f.fs.readOnly {
		return 0
	}
	return errno(f.f.Sync())
}

// Datasync implements experimentalsys.File.
func (f *rootFile) Datasync() experimentalsys.Errno { return f.Sync() }

// Utimens implements experimentalsys.File on the open descriptor.
func (f *rootFile) Utimens(atim, mtim int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if f.fs.readOnly {
		return experimentalsys.EROFS
	}
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		return 0
	}
	return errno(f.control(func(fd uintptr) error {
		return futimens(int(fd), atim, mtim)
	}))
}

// Close implements experimentalsys.File.
func (f *rootFile) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	return errno(f.f.Close())
}

// timespec converts epoch nanoseconds, passing UTIME_OMIT through.
func timespec(ns int64) syscall.Timespec {
	if ns == experimentalsys.UTIME_OMIT {
		return syscall.Timespec{Nsec: utimeOmit}
	}
	return syscall.NsecToTimespec(time.Unix(0, ns).UnixNano())
}

var _ experimentalsys.File = (*rootFile)(nil)
