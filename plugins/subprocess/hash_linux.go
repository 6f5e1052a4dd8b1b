package subprocess

import "golang.org/x/sys/unix"

// mapPopulate fills a mapping at once (Linux's MAP_POPULATE).
const mapPopulate = unix.MAP_POPULATE
