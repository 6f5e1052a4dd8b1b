package subprocess

import (
	"io/fs"
	"syscall"
)

// haveFileID: Linux's stat has what checkEntry compares.
const haveFileID = true

// statID returns fi's identity, owner and link count (fi from os.Lstat).
func statID(fi fs.FileInfo) (id fileID, uid int, nlink uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, -1, 0
	}
	return fileID{Size: fi.Size(), Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano()}, int(st.Uid), uint64(st.Nlink)
}
