//! `weir compile`: a tcpdump expression to the program weir would run, printed the way
//! `tcpdump -d`, `-dd` and `-ddd` print classic BPF, or as eBPF assembly.
//!
//! ```text
//! weir compile 'tcp port 80'               # classic BPF listing (like tcpdump -d)
//! weir compile -dd -y LINUX_SLL udp        # C array
//! weir compile --ebpf --target xdp ip6     # eBPF assembly for XDP
//! weir compile --ebpf -o f.o --target tc udp   # a BPF ELF object bpftool and tc load
//! weir compile -O0 -d 'ip and ip'          # without the IR optimizer
//! weir compile --match dispatch.txt        # a pfmatch program as XDP eBPF assembly
//! weir compile --match dispatch.txt -o m.o # ... as an XDP object (ip link set DEV xdp obj m.o)
//! ```
//!
//! `--match` compiles a pfmatch program (`weir match`'s) to one XDP program: the handler
//! names `pass`, `drop`, `tx` and `redirect:N` (slot N of the devmap `pfm_devs`) are XDP
//! actions, any other handler passes the packet, and every handler's packets are counted
//! in the per-CPU array `pfm_counts` (key: the handler's index in order of first
//! appearance; the last key: no handler). The listing starts with `#!` directives for the
//! program type and the maps (weir's listing form, which `weir exec`/`verify` read).
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
    /// Compile this pfmatch program (`match { test => handler ... }`) to an XDP program
    /// instead of an expression (eBPF; see the module documentation for the handlers).
    #[arg(long = "match", value_name = "PROGRAM-FILE", conflicts_with_all = ["dump", "expression", "expression_file", "no_optimize"])]
    match_program: Option<std::path::PathBuf>,
    /// The eBPF program type (with --ebpf): socket (`__sk_buff` context, legacy packet
    /// loads; also sched_cls and sched_act) or xdp (`xdp_md`, direct packet access with
    /// bounds checks the Linux verifier accepts). Default: socket; with --match, xdp (the
    /// only one it takes).
    #[arg(long)]
    target: Option<ProgType>,
    /// With --ebpf: write the program as a relocatable BPF ELF object here (`-`: standard
    /// output), as clang would build it (section `socket`, `xdp`, `tc` or `action`), for
    /// `bpftool prog load`, libbpf and `tc filter add ... bpf obj FILE sec tc`.
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<std::path::PathBuf>,
    /// The program's function symbol in the object written with -o (default `weir_filter`,
    /// `weir_match` with --match).
    #[arg(long = "name", value_name = "NAME", requires = "output")]
    function: Option<String>,
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
    if let Some(path) = &args.match_program {
        if args.target.is_some_and(|t| t != ProgType::Xdp) {
            return Err("--match compiles to XDP only (--target xdp)".into());
        }
        return compile_match(&args, path);
    }
    if !args.ebpf && (args.target.is_some() || args.output.is_some()) {
        return Err(format!(
            "{} needs --ebpf (or --match)",
            if args.output.is_some() { "-o" } else { "--target" }
        ));
    }
    let target = args.target.unwrap_or(ProgType::SocketFilter);
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
            weir::emit_ebpf(&filter, target)?
        } else {
            ebpf::emit(&filter, target).map_err(|e| format!("eBPF emitter: {e}"))?
        };
        if let Some(path) = &args.output {
            let function = args.function.as_deref().unwrap_or("weir_filter");
            let options = weir::elf::write::ObjectOptions::new(function);
            let program = program.with_prog_type(target);
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

/// `weir compile --match FILE [-o OBJ]`: the dispatch's XDP program, as a listing or an
/// object. The program compiles for the link type of `-y` (Ethernet by default: XDP sees
/// Ethernet frames).
fn compile_match(args: &CompileArgs, path: &std::path::Path) -> Result<ExitCode, String> {
    let source = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let linktype = match &args.linktype {
        Some(name) => linktype_arg(name)?,
        None => LinkType::Ethernet,
    };
    let program = match weir::pfmatch::parse_with(
        &source,
        &weir::pflang::Options::new(linktype),
        &NameDb::system(),
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("weir: {}: {}", path.display(), e.render());
            return Ok(ExitCode::FAILURE);
        }
    };
    for w in &program.warnings {
        eprintln!("weir: {}: {w}", path.display());
    }
    let dispatch = weir::pfmatch::Dispatch::compile(&program)?;
    if let Some(out) = &args.output {
        let function = args.function.as_deref().unwrap_or(weir::dispatch::XDP_FUNCTION);
        let object = weir::dispatch::xdp_object(&dispatch, function)
            .map_err(|e| format!("-o {}: {e}", out.display()))?;
        return crate::run::write_output(Some(out), &object);
    }
    let xdp = dispatch.xdp()?;
    let mut text = String::from("#! type xdp\n");
    for m in xdp.program.maps() {
        let kind = m.map_type.name().unwrap_or("unknown");
        text.push_str(&format!(
            "#! map {} {kind} key={} value={} entries={}\n",
            m.name, m.key_size, m.value_size, m.max_entries
        ));
    }
    for (h, name) in dispatch.handlers().iter().enumerate() {
        text.push_str(&format!(
            "#! note {} key {h}: {name} ({:?})\n",
            weir::pfmatch::xdp::COUNTS_MAP,
            xdp.actions[h]
        ));
    }
    text.push_str(&format!(
        "#! note {} key {}: no handler (Pass)\n",
        weir::pfmatch::xdp::COUNTS_MAP,
        dispatch.handlers().len()
    ));
    text.push_str(&weir::isa::asm::disassemble(xdp.program.insns()));
    crate::out::text(&text)?;
    Ok(ExitCode::SUCCESS)
}
