//! `weir compile`: a tcpdump expression to the program weir would run, printed the way
//! `tcpdump -d`, `-dd` and `-ddd` print classic BPF, or as eBPF assembly.
//!
//! ```text
//! weir compile 'tcp port 80'               # classic BPF listing (like tcpdump -d)
//! weir compile -dd -y LINUX_SLL udp        # C array
//! weir compile --ebpf --target xdp ip6     # eBPF assembly for XDP
//! weir compile --ebpf -o f.o --target tc udp   # a BPF ELF object bpftool and tc load
//! weir compile -O0 -d 'ip and ip'          # without the IR optimizer
//! ```
//!
//! The stages are one call each (compile, optimize, emit, print), so a stage that gains a
//! new implementation is wired here by changing one line.

use std::process::ExitCode;
use weir::ProgType;

use clap::{ArgAction, Args};
use weir::emit::{cbpf, ebpf};
use weir::pflang::LinkType;
use weir::NameDb;

use crate::filter::{linktype_arg, options, Expression};

#[derive(Args)]
pub struct CompileArgs {
    /// Classic BPF output: -d a listing, -dd a C array, -ddd decimal numbers (tcpdump's
    /// forms). The default is -d.
    #[arg(short = 'd', action = ArgAction::Count)]
    dump: u8,
    /// Print eBPF assembly instead of classic BPF.
    #[arg(long, conflicts_with = "dump")]
    ebpf: bool,
    /// The eBPF program type (with --ebpf): socket (`__sk_buff` context, legacy packet
    /// loads; also sched_cls and sched_act) or xdp (`xdp_md`, direct packet access with
    /// bounds checks the Linux verifier accepts).
    #[arg(long, default_value = "socket", requires = "ebpf")]
    target: ProgType,
    /// With --ebpf: write the program as a relocatable BPF ELF object here (`-`: standard
    /// output), as clang would build it (section `socket`, `xdp`, `tc` or `action`), for
    /// `bpftool prog load`, libbpf and `tc filter add ... bpf obj FILE sec tc`.
    #[arg(short = 'o', value_name = "FILE", requires = "ebpf")]
    output: Option<std::path::PathBuf>,
    /// The program's function symbol in the object written with -o.
    #[arg(long = "name", value_name = "NAME", default_value = "weir_filter", requires = "output")]
    function: String,
    /// Turn the filter optimizer off, as tcpdump's -O does (-O0 too; -O1 keeps it on).
    #[arg(short = 'O')]
    no_optimize: bool,
    /// The level digit of -O0 / -O1 (tcpdump's -O takes none, so `-O tcp` is -O and an
    /// expression).
    #[arg(short = '0', hide = true, requires = "no_optimize")]
    level_0: bool,
    #[arg(short = '1', hide = true, requires = "no_optimize", conflicts_with = "level_0")]
    level_1: bool,
    /// Link type to compile for (a tcpdump -y name or DLT number); default EN10MB.
    #[arg(short = 'y', long = "linktype", value_name = "LINKTYPE")]
    linktype: Option<String>,
    /// Read the expression from this file (`#` comments allowed).
    #[arg(short = 'F', value_name = "EXPRFILE")]
    expression_file: Option<std::path::PathBuf>,
    /// The filter expression (the arguments are joined with spaces).
    #[arg(value_name = "EXPRESSION")]
    expression: Vec<String>,
}

pub fn run(args: CompileArgs) -> Result<ExitCode, String> {
    let expression = Expression::read(&args.expression, args.expression_file.as_deref())?;
    let linktype = match &args.linktype {
        Some(name) => linktype_arg(name)?,
        None => LinkType::Ethernet,
    };
    let optimize = !args.no_optimize || args.level_1;
    let mut options = options(linktype);
    options.optimize = optimize;
    let filter = weir::compile_filter_with(&expression.text, &options, &NameDb::system())
        .map_err(|e| expression.error(&e))?;
    let text = if args.ebpf {
        let program = if optimize {
            weir::emit_ebpf(&filter, args.target)?
        } else {
            ebpf::emit(&filter, args.target).map_err(|e| format!("eBPF emitter: {e}"))?
        };
        if let Some(path) = &args.output {
            let options = weir::elf::write::ObjectOptions::new(&args.function);
            let program = program.with_prog_type(args.target);
            let object = weir::elf::write::write_program(&program, &options)
                .map_err(|e| format!("-o {}: {e}", path.display()))?;
            return crate::run::write_output(Some(path), &object);
        }
        weir::isa::asm::disassemble(program.insns())
    } else {
        let insns = if optimize { cbpf::emit(&filter) } else { cbpf::emit_unoptimized(&filter) }
            .map_err(|e| format!("classic BPF emitter: {e}"))?;
        match args.dump {
            0 | 1 => weir::isa::cbpf::format_listing(&insns),
            2 => weir::isa::cbpf::format_dd(&weir::isa::cbpf::encode(&insns)),
            _ => weir::isa::cbpf::format_ddd(&weir::isa::cbpf::encode(&insns)),
        }
    };
    crate::out::text(&text)?;
    Ok(ExitCode::SUCCESS)
}
