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
        Err(Refusal::Conflict("1 prober still belong to this region".into()))
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
