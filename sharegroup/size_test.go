package sharegroup

import "unsafe"

func unsafeSizeofRun() uintptr { return unsafe.Sizeof(run(0)) }
