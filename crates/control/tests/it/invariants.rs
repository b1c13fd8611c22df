//! The rules that span objects, as the configuration decides them.

use vantage_control::config::GroupRecord;
use vantage_control::invariants::{Invariants, Refusal};
use vantage_core::model::{NodeGroup, Region};

use crate::lab::{CLUSTER, Lab};

#[test]
fn a_region_with_probers_cannot_be_deleted() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let c = lab.control.config();
    assert_eq!(Region::check_delete(r.0, &c), Ok(Vec::new()));
    lab.prober("fra", r);
    let c = lab.control.config();
    assert_eq!(
        Region::check_delete(r.0, &c),
        Err(Refusal::Conflict("1 prober still belongs to this region".into()))
    );
}

#[test]
fn names_are_unique_among_siblings_without_case_and_a_cluster_takes_its_children_along() {
    let mut lab = Lab::new();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    let config = lab.control.config();
    let twin = GroupRecord {
        cluster: c,
        group: serde_json::from_value::<NodeGroup>(serde_json::json!({"name": "FRA-1"})).unwrap(),
    };
    match twin.check(9999, &config) {
        Err(Refusal::Invalid { field, reason }) => {
            assert_eq!(field, "name");
            assert!(reason.contains("already exists"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(twin.check(g.0, &config), Ok(()), "renaming itself is fine");
    assert_eq!(vantage_core::model::Cluster::check_delete(c.0, &config), Ok(vec![g.0]));
}

#[test]
fn the_last_enabled_node_a_line_answers_with_goes_only_with_force() {
    use vantage_control::config::NodeRecord;
    let mut lab = Lab::new();
    let (_, c, g, n) = lab.one_node();
    let config = lab.control.config();
    // A cluster without lines answers every group on its default line.
    assert_eq!(
        NodeRecord::check_unforced_delete(n.0, &config),
        Err(Refusal::Conflict(
            "edge-1 is the last enabled node of group fra-1, which line default answers with: deleting it leaves that line to its all-down policy. Delete it with force (ctl nodes delete --force), or disable it".into()
        ))
    );
    assert_eq!(NodeRecord::check_delete(n.0, &config), Ok(Vec::new()), "with force it goes");
    // A second enabled node in the group: either may go.
    let other = lab.node(c, g, "edge-2", &[("203.0.113.20", vantage_core::address::Level::Primary)]);
    let config = lab.control.config();
    assert_eq!(NodeRecord::check_unforced_delete(n.0, &config), Ok(()));
    // A disabled node is no last enabled one, and leaves the other the last.
    let mut rec = (*config.nodes[&other.0].value).clone();
    rec.node.enabled = false;
    lab.replace(other.0, vantage_control::config::Object::Node(rec));
    let config = lab.control.config();
    assert_eq!(NodeRecord::check_unforced_delete(other.0, &config), Ok(()));
    assert!(NodeRecord::check_unforced_delete(n.0, &config).is_err());
}
