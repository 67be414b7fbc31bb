package extract

import "syscall"

const mapNoReserve = syscall.MAP_NORESERVE
