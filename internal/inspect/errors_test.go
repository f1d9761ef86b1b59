package inspect

import (
	"fmt"

	"golang.org/x/sys/unix"
)

var errPermission = fmt.Errorf("netlink: %w", unix.EPERM)
