# Writes an assembly file that .incbin's a helper binary into the library's read-only data as ${NAME}_blob
# .. ${NAME}_blob_end, with its SHA-256 as the string ${NAME}_sha256 (names the copy the library writes).
file(SHA256 ${BIN} BLOB_SHA256)
file(WRITE ${OUT} "    .section .rodata.${NAME},\"a\"\n    .balign 64\n    .globl ${NAME}_blob\n    .hidden ${NAME}_blob\n${NAME}_blob:\n    .incbin \"${BIN}\"\n    .globl ${NAME}_blob_end\n    .hidden ${NAME}_blob_end\n${NAME}_blob_end:\n    .globl ${NAME}_sha256\n    .hidden ${NAME}_sha256\n${NAME}_sha256:\n    .asciz \"${BLOB_SHA256}\"\n    .section .note.GNU-stack,\"\",@progbits\n")
