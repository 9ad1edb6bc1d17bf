//! The eBPF text assembler and disassembler (being written).
