//! Who a certificate belongs to, and names that compare without case.

use vantage_control::identity::{Caller, Refused};

use crate::lab::Lab;

#[test]
fn prober_names_compare_without_case() {
    let mut lab = Lab::new();
    let r = lab.region("ap");
    let p = lab.prober("Tokyo", r);
    let c = lab.control.config();
    assert_eq!(c.prober_named("tokyo"), Some(p.id()), "tokyo is Tokyo");
    assert_eq!(c.prober_named("TOKYO"), Some(p.id()));
    assert_eq!(c.prober_named("osaka"), None);
}

#[test]
fn a_certificate_names_an_enabled_prober_a_node_or_nobody() {
    let mut lab = Lab::new();
    let r = lab.region("ap");
    let p = lab.prober("tokyo", r);
    let c = lab.control.config();
    assert_eq!(c.identify(Some("fp-tokyo")), Ok(p));
    assert_eq!(c.identify(None), Err(Refused::NoCertificate));
    assert_eq!(c.identify(Some("fp-other")), Err(Refused::Unknown));
    let Caller::Prober(id) = p else { unreachable!() };
    let mut rec = (*c.probers[&id.0].value).clone();
    rec.enabled = false;
    lab.replace(id.0, vantage_control::config::Object::Prober(rec));
    assert_eq!(
        lab.control.config().identify(Some("fp-tokyo")),
        Err(Refused::Disabled { prober: id, name: "tokyo".into() })
    );
    assert_eq!(lab.control.config().renewer(Some("fp-tokyo")), Ok(p), "a disabled prober may still renew");
    assert_eq!(lab.control.config().renewer(Some("fp-other")), Err(Refused::Unknown));
}
