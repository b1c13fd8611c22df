//! Enrollment and renewal as decisions: a token admits once, within its validity, the prober
//! or node it names; the change saves the certificate and says who enrolled.

use vantage_control::config::{EnrollToken, Object, Role};
use vantage_control::enrollment::{Refusal, hostname};
use vantage_control::identity::Caller;
use vantage_core::Timestamp;
use vantage_core::ids::{NodeId, RegionId};

use crate::lab::{Lab, ip};

fn token(
    role: Role,
    name: &str,
    region: Option<RegionId>,
    node: Option<NodeId>,
    sha256: &str,
) -> EnrollToken {
    EnrollToken {
        role,
        name: name.into(),
        region,
        node,
        prefix: format!("vtp_{sha256}"),
        sha256: sha256.into(),
        expires_at: Timestamp::from_millis(Timestamp::EPOCH.millis() + 1),
        used_at: None,
    }
}

/// A token valid for an hour from the lab's now.
fn valid(lab: &Lab, mut t: EnrollToken) -> EnrollToken {
    t.expires_at = Timestamp::from_millis(lab.now.millis() + 3_600_000);
    t
}

#[test]
fn a_prober_token_admits_once_and_saves_the_prober_with_its_certificate() {
    let mut lab = Lab::new();
    let region = lab.region("ap");
    let t = valid(&lab, token(Role::Prober, "sg-1", Some(region), None, "aa"));
    let token_id = lab.put(Object::EnrollToken(t.clone()));
    let mut c = (*lab.control.config()).clone();
    let admission = c.admit("aa", lab.now).expect("admitted");
    let Caller::Prober(id) = admission.caller() else { panic!("a prober") };
    assert!(!lab.control.config().probers.contains_key(&id.0), "a new id");
    let e = admission.enrolled("fp-sg".into(), ip("192.0.2.7"), "sg-host", "0.1.0", lab.now);
    assert_eq!((e.caller, e.name.as_str()), (Caller::Prober(id), "sg-1"));
    assert_eq!(
        (e.actor.as_str(), e.action, e.object.as_str()),
        (&*format!("prober:{}", id.0), "probe.enroll", &*format!("prober:{}", id.0))
    );
    assert_eq!(e.metadata["token"], "vtp_aa");
    assert_eq!(e.metadata["hostname"], "sg-host");
    let [(tid, Object::EnrollToken(used)), (pid, Object::Prober(rec))] = e.puts.as_slice() else {
        panic!("the token and the prober: {:?}", e.puts)
    };
    assert_eq!((*tid, used.used_at), (token_id, Some(lab.now)));
    assert_eq!(*pid, id.0);
    assert_eq!((rec.name.as_str(), rec.region, rec.enabled), ("sg-1", region, true));
    assert_eq!((rec.cert_sha256.as_deref(), rec.cert_issued_at), (Some("fp-sg"), Some(lab.now)));
    // Saved, the token is used: a second enrollment with it is refused, saying when.
    for (id, o) in e.puts {
        lab.replace(id, o);
    }
    let mut c = (*lab.control.config()).clone();
    let refusal = c.admit("aa", lab.now).unwrap_err();
    assert_eq!(refusal, Refusal::Used { at: lab.now });
    assert!(refusal.is_token());
}

#[test]
fn refusals_name_the_token_or_the_configuration() {
    let mut lab = Lab::new();
    let region = lab.region("ap");
    lab.prober("sg-1", region);
    lab.put(Object::EnrollToken(token(Role::Prober, "sg-2", Some(region), None, "expired")));
    lab.put(Object::EnrollToken(valid(&lab, token(Role::Prober, "SG-1", Some(region), None, "taken"))));
    lab.put(Object::EnrollToken(valid(&lab, token(Role::Node, "", None, Some(NodeId(9)), "gone"))));
    let mut c = (*lab.control.config()).clone();
    let expired = c.admit("expired", lab.now).unwrap_err();
    assert_eq!(
        expired.to_string(),
        format!("this enrollment token expired at {}", Timestamp::from_millis(1))
    );
    assert!(expired.is_token());
    assert_eq!(c.admit("nothing", lab.now).unwrap_err().to_string(), "unknown enrollment token");
    let taken = c.admit("taken", lab.now).unwrap_err();
    assert_eq!(
        (taken.to_string().as_str(), taken.is_token()),
        ("a prober named \"SG-1\" already exists", false)
    );
    let gone = c.admit("gone", lab.now).unwrap_err();
    assert_eq!(gone, Refusal::NodeGone { node: NodeId(9) });
    assert!(!gone.is_token(), "the configuration changed, not the token");
}

#[test]
fn a_node_enrolls_again_with_a_new_token_and_both_renew_until_deleted() {
    let mut lab = Lab::new();
    let (prober, _, _, node) = lab.one_node();
    lab.put(Object::EnrollToken(valid(&lab, token(Role::Node, "", None, Some(node), "nn"))));
    let mut c = (*lab.control.config()).clone();
    let admission = c.admit("nn", lab.now).expect("admitted");
    assert_eq!(admission.caller(), Caller::Node(node));
    let e = admission.enrolled("fp-edge".into(), ip("::ffff:198.51.100.4"), "edge", "0.1.0", lab.now);
    assert_eq!(
        (e.name.as_str(), e.action, e.actor.clone()),
        ("edge-1", "node.enroll", format!("node:{}", node.0))
    );
    let Some((_, Object::Node(rec))) = e.puts.get(1) else { panic!("{:?}", e.puts) };
    assert_eq!(rec.enrolled_from, Some(ip("198.51.100.4")), "the IPv4 address, not its mapped form");
    assert_eq!(rec.cert_sha256.as_deref(), Some("fp-edge"));
    for (id, o) in e.puts {
        lab.replace(id, o);
    }
    // Renewal: the record with the new certificate, audited by kind.
    let c = lab.control.config();
    let later = Timestamp::from_millis(lab.now.millis() + 1_000);
    let (o, action) = c.renewal(Caller::Node(node)).expect("enrolled").renewed("fp-2".into(), later);
    let Object::Node(rec) = o else { panic!("a node") };
    assert_eq!(
        (rec.cert_sha256.as_deref(), rec.cert_issued_at, action),
        (Some("fp-2"), Some(later), "node.certificate_renew")
    );
    assert_eq!(rec.enrolled_from, Some(ip("198.51.100.4")), "renewal keeps where it enrolled from");
    let (o, action) = c.renewal(prober).expect("a prober").renewed("fp-3".into(), later);
    assert!(matches!(o, Object::Prober(ref p) if p.cert_sha256.as_deref() == Some("fp-3")), "{o:?}");
    assert_eq!(action, "probe.certificate_renew");
    lab.delete(node.0);
    assert!(lab.control.config().renewal(Caller::Node(node)).is_none(), "deleted: revoked");
}

#[test]
fn a_host_name_is_kept_without_control_characters_and_at_most_253_long() {
    assert_eq!(hostname("edge-1\u{1b}[31m\n"), "edge-1[31m");
    assert_eq!(hostname(&"a".repeat(300)).len(), 253);
}
