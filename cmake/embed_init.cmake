# Writes an assembly file that .incbin's the static init binary into the library's read-only data, with
# its SHA-256 (names the cached copy on tmpfs, see src/runtime/embedded_init.cpp).
file(SHA256 ${BIN} SANDLET_INIT_SHA256)
file(WRITE ${OUT} "    .section .rodata.sandlet_init,\"a\"\n    .balign 64\n    .globl sandlet_init_blob\n    .hidden sandlet_init_blob\nsandlet_init_blob:\n    .incbin \"${BIN}\"\n    .globl sandlet_init_blob_end\n    .hidden sandlet_init_blob_end\nsandlet_init_blob_end:\n    .globl sandlet_init_sha256\n    .hidden sandlet_init_sha256\nsandlet_init_sha256:\n    .asciz \"${SANDLET_INIT_SHA256}\"\n    .section .note.GNU-stack,\"\",@progbits\n")
