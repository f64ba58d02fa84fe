//! Pooled OT (offline random COTs, online derandomisation): every flavour against its definition
//! for random choices, boundary sizes, automatic refill, wire cost, hostile peers — once per COT
//! source that fills exactly what is asked (IKNP and SoftSpokenOT; Ferret, which fills whole
//! iterations, has its pool tests in `ferret.rs`).

mod iknp {
    const SOURCE: secinfer_ot::CotSource = secinfer_ot::CotSource::Iknp;
    include!("pool/cases.rs");
}

mod softspoken_k1 {
    const SOURCE: secinfer_ot::CotSource = secinfer_ot::CotSource::SoftSpoken { k: 1 };
    include!("pool/cases.rs");
}

mod softspoken_k3 {
    const SOURCE: secinfer_ot::CotSource = secinfer_ot::CotSource::SoftSpoken { k: 3 };
    include!("pool/cases.rs");
}

mod softspoken_k4 {
    const SOURCE: secinfer_ot::CotSource = secinfer_ot::CotSource::SoftSpoken { k: 4 };
    include!("pool/cases.rs");
}

mod softspoken_k8 {
    const SOURCE: secinfer_ot::CotSource = secinfer_ot::CotSource::SoftSpoken { k: 8 };
    include!("pool/cases.rs");
}
