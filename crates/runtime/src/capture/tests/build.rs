//! Capture files built byte by byte for the tests (both byte orders, odd fields welcome).

/// One packet to write.
#[derive(Clone, Debug)]
pub struct Rec {
    pub data: Vec<u8>,
    pub wire: u32,
    pub ts_sec: u32,
    pub ts_frac: u32,
    /// pcapng: the raw 64-bit timestamp.
    pub ts_raw: u64,
}

impl Rec {
    pub fn new(data: Vec<u8>) -> Rec {
        let wire = data.len() as u32;
        Rec { data, wire, ts_sec: 0, ts_frac: 0, ts_raw: 0 }
    }
    pub fn wire(mut self, wire: u32) -> Rec {
        self.wire = wire;
        self
    }
    pub fn ts(mut self, sec: u32, frac: u32) -> Rec {
        (self.ts_sec, self.ts_frac) = (sec, frac);
        self
    }
    pub fn ts_raw(mut self, raw: u64) -> Rec {
        self.ts_raw = raw;
        self
    }
}

fn u16b(big: bool, v: u16) -> [u8; 2] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn u32b(big: bool, v: u32) -> [u8; 4] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

/// A pcap file: header fields as given, records with `record_header` bytes of header (16,
/// or 24 for the modified format) and `caplen` = the data's length.
#[allow(clippy::too_many_arguments)]
pub fn pcap_file(
    big: bool,
    magic: u32,
    major: u16,
    minor: u16,
    snaplen: u32,
    linktype: u32,
    record_header: usize,
    records: &[Rec],
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(u32b(big, magic));
    out.extend(u16b(big, major));
    out.extend(u16b(big, minor));
    out.extend([0; 8]);
    out.extend(u32b(big, snaplen));
    out.extend(u32b(big, linktype));
    for r in records {
        out.extend(u32b(big, r.ts_sec));
        out.extend(u32b(big, r.ts_frac));
        out.extend(u32b(big, r.data.len() as u32));
        out.extend(u32b(big, r.wire));
        out.extend(vec![0; record_header - 16]);
        out.extend(&r.data);
    }
    out
}

/// A pcapng file, block by block.
pub struct Ng {
    pub big: bool,
    pub bytes: Vec<u8>,
}

fn pad(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
}

impl Ng {
    pub fn new(big: bool) -> Ng {
        Ng { big, bytes: Vec::new() }
    }

    fn options(&self, body: &mut Vec<u8>, options: &[(u16, Vec<u8>)]) {
        if options.is_empty() {
            return;
        }
        for (code, value) in options {
            body.extend(u16b(self.big, *code));
            body.extend(u16b(self.big, value.len() as u16));
            body.extend(value);
            pad(body);
        }
        body.extend([0; 4]);
    }

    pub fn block(&mut self, kind: u32, body: &[u8]) -> &mut Ng {
        let len = 12 + body.len() as u32;
        self.bytes.extend(u32b(self.big, kind));
        self.bytes.extend(u32b(self.big, len));
        self.bytes.extend(body);
        self.bytes.extend(u32b(self.big, len));
        self
    }

    pub fn shb(&mut self) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(u32b(self.big, 0x1A2B_3C4D));
        body.extend(u16b(self.big, 1));
        body.extend(u16b(self.big, 0));
        body.extend([0x11; 8]);
        self.block(0x0A0D_0D0A, &body)
    }

    pub fn idb(&mut self, linktype: u16, snaplen: u32, options: &[(u16, Vec<u8>)]) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(u16b(self.big, linktype));
        body.extend([0; 2]);
        body.extend(u32b(self.big, snaplen));
        self.options(&mut body, options);
        self.block(1, &body)
    }

    pub fn epb(&mut self, iface: u32, r: &Rec, options: &[(u16, Vec<u8>)]) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(u32b(self.big, iface));
        body.extend(u32b(self.big, (r.ts_raw >> 32) as u32));
        body.extend(u32b(self.big, r.ts_raw as u32));
        body.extend(u32b(self.big, r.data.len() as u32));
        body.extend(u32b(self.big, r.wire));
        body.extend(&r.data);
        pad(&mut body);
        self.options(&mut body, options);
        self.block(6, &body)
    }

    pub fn pb(&mut self, iface: u16, r: &Rec) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(u16b(self.big, iface));
        body.extend([0; 2]);
        body.extend(u32b(self.big, (r.ts_raw >> 32) as u32));
        body.extend(u32b(self.big, r.ts_raw as u32));
        body.extend(u32b(self.big, r.data.len() as u32));
        body.extend(u32b(self.big, r.wire));
        body.extend(&r.data);
        pad(&mut body);
        self.block(2, &body)
    }

    pub fn spb(&mut self, r: &Rec) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(u32b(self.big, r.wire));
        body.extend(&r.data);
        pad(&mut body);
        self.block(3, &body)
    }

    pub fn isb(&mut self, iface: u32) -> &mut Ng {
        let mut body = u32b(self.big, iface).to_vec();
        body.extend([0; 8]);
        self.block(5, &body)
    }

    pub fn nrb(&mut self) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(u16b(self.big, 1));
        body.extend(u16b(self.big, 6));
        body.extend([10, 0, 0, 1, b'a', 0]);
        pad(&mut body);
        body.extend([0; 4]);
        self.block(4, &body)
    }

    pub fn custom(&mut self, kind: u32) -> &mut Ng {
        self.block(kind, &[1, 2, 3, 4, 5, 6, 7, 8])
    }
}

/// The block types in a run of whole blocks.
pub fn block_types(mut bytes: &[u8], big: bool) -> Vec<u32> {
    let word = |b: &[u8], at: usize| {
        let a: [u8; 4] = b[at..at + 4].try_into().unwrap();
        if big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let mut out = Vec::new();
    while !bytes.is_empty() {
        out.push(word(bytes, 0));
        let len = word(bytes, 4) as usize;
        bytes = &bytes[len..];
    }
    out
}
