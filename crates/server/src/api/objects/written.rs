//! Object lists written from what the previous list of the same kind wrote: an item whose view
//! equals the one written for it last time is written with the same bytes, not serialised
//! again (a list of 10,000 nodes is about 15 MB of JSON, and between two passes nearly every
//! node's view is unchanged). An item whose kind says what its view is made of ([`Made`]: a
//! node) and whose inputs are those of its last writing is written from those bytes without
//! its view being made at all: making and comparing 10,000 unchanged node views took 22 of a
//! list's 23 ms. Otherwise the view is made and compared, so the answer is always exactly what
//! serialising every view would write.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;
use vantage_core::ids::ClusterId;

/// An item of a list, made only when asked.
pub(crate) trait Made<V, I> {
    /// Whether it is made of `inputs` (those of its last writing): its view would be the one
    /// written then.
    fn made_of(&self, inputs: &I) -> bool;
    /// Its inputs (`None`: it cannot say) and its view.
    fn make(self) -> (Option<I>, V);
}

/// A view made already, of inputs it cannot name: compared with the last one written.
pub(crate) struct Plain<V>(pub(crate) V);

impl<V> Made<V, ()> for Plain<V> {
    fn made_of(&self, (): &()) -> bool {
        false
    }

    fn make(self) -> (Option<()>, V) {
        (None, self.0)
    }
}

/// One item as last written: what its view was made of, the view, and its bytes.
struct Entry<V, I> {
    inputs: Option<I>,
    view: V,
    bytes: Box<[u8]>,
}

/// One list's items as last written, in increasing id order (boxed: moved from one list to the
/// next without copying a view).
type Items<V, I> = Vec<(i64, Box<Entry<V, I>>)>;

/// A list: a kind's objects, of one cluster or of all.
pub(crate) type List = (&'static str, Option<ClusterId>);

/// Each list's items as last written (an `Items` of the kind's view and inputs).
type Lists = HashMap<List, Box<dyn Any + Send>>;

/// The last writing of each list.
#[derive(Debug, Default)]
pub(crate) struct Written {
    lists: Mutex<Lists>,
}

impl Written {
    /// `{"items":[…]}` of `items`, in their order: by increasing id, as a configuration's
    /// objects are (an item out of that order is written in full). Two lists of one kind
    /// written at once each write in full what the other holds; the later one's items are kept.
    pub(crate) fn list<V, I, M>(
        &self,
        list: List,
        items: impl Iterator<Item = (i64, M)>,
    ) -> serde_json::Result<Vec<u8>>
    where
        V: Serialize + PartialEq + Send + 'static,
        I: Send + 'static,
        M: Made<V, I>,
    {
        let before: Items<V, I> = self
            .lock()
            .remove(&list)
            .and_then(|b| b.downcast::<Items<V, I>>().ok())
            .map(|b| *b)
            .unwrap_or_default();
        let mut out = Vec::with_capacity(before.iter().map(|(_, e)| e.bytes.len() + 1).sum::<usize>() + 16);
        out.extend_from_slice(b"{\"items\":[");
        let mut after = Items::with_capacity(before.len());
        let mut before = before.into_iter().peekable();
        for (n, (id, item)) in items.enumerate() {
            if n > 0 {
                out.push(b',');
            }
            // Items gone since are passed over.
            while before.next_if(|(b, _)| *b < id).is_some() {}
            let entry = match before.next_if(|(b, _)| *b == id).map(|(_, e)| e) {
                Some(e) if e.inputs.as_ref().is_some_and(|i| item.made_of(i)) => e,
                old => {
                    let (inputs, view) = item.make();
                    let bytes = match old {
                        Some(e) if e.view == view => e.bytes,
                        _ => serde_json::to_vec(&view)?.into_boxed_slice(),
                    };
                    Box::new(Entry { inputs, view, bytes })
                }
            };
            out.extend_from_slice(&entry.bytes);
            after.push((id, entry));
        }
        out.extend_from_slice(b"]}");
        self.lock().insert(list, Box::new(after));
        Ok(out)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lists> {
        // A panic while the map was held leaves it whole: it is only ever swapped.
        self.lists.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize)]
    struct View {
        name: String,
        up: bool,
    }

    fn view(name: &str, up: bool) -> View {
        View { name: name.into(), up }
    }

    /// Written from before or not, a list is what serialising it whole writes: changed items
    /// anew, gone items gone, new items added, another list (a cluster's) apart.
    #[test]
    fn a_list_is_what_serialising_it_whole_writes() {
        let written = Written::default();
        let whole = |items: &[(i64, View)]| {
            serde_json::to_vec(&crate::views::Items::from(
                items.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
            ))
            .unwrap()
        };
        let lists: [Vec<(i64, View)>; 4] = [
            vec![(1, view("a", true)), (2, view("b\"", true))],
            vec![(1, view("a", false)), (2, view("b\"", true)), (3, view("c", true))],
            vec![(3, view("c", true))],
            vec![],
        ];
        for items in &lists {
            let plain = items.iter().map(|(id, v)| (*id, Plain(v.clone())));
            let out = written.list(("node", None), plain).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(whole(items)).unwrap());
            let first = items.iter().take(1).map(|(id, v)| (*id, Plain(v.clone())));
            let of_cluster = written.list(("node", Some(ClusterId(2))), first).unwrap();
            assert_eq!(of_cluster, whole(&items[..items.len().min(1)]));
        }
    }

    /// Items out of id order, or twice, are written as given (only their reuse is lost).
    #[test]
    fn items_out_of_order_are_written_as_given() {
        let written = Written::default();
        let list = |ids: &[i64]| {
            let items = ids.iter().map(|id| (*id, Plain(view(&id.to_string(), true))));
            String::from_utf8(written.list(("node", None), items).unwrap()).unwrap()
        };
        list(&[1, 2, 3]);
        assert_eq!(
            list(&[3, 1, 3]),
            r#"{"items":[{"name":"3","up":true},{"name":"1","up":true},{"name":"3","up":true}]}"#
        );
        assert_eq!(list(&[1, 2]), r#"{"items":[{"name":"1","up":true},{"name":"2","up":true}]}"#);
    }

    /// An item of `inputs` whose view is `view`; counts how many views were made.
    struct Counted<'a> {
        inputs: u32,
        view: View,
        made: &'a std::cell::Cell<usize>,
    }

    impl Made<View, u32> for Counted<'_> {
        fn made_of(&self, inputs: &u32) -> bool {
            *inputs == self.inputs
        }

        fn make(self) -> (Option<u32>, View) {
            self.made.set(self.made.get() + 1);
            (Some(self.inputs), self.view)
        }
    }

    /// An item made of the inputs of its last writing is written from its bytes without its
    /// view being made; one whose inputs changed is made, and written anew only if its view
    /// changed too.
    #[test]
    fn an_item_of_the_same_inputs_is_not_made_again() {
        let written = Written::default();
        let made = std::cell::Cell::new(0);
        let write = |items: &[(i64, u32, View)]| {
            made.set(0);
            let counted = items
                .iter()
                .map(|(id, inputs, v)| (*id, Counted { inputs: *inputs, view: v.clone(), made: &made }));
            let out = written.list(("node", None), counted).unwrap();
            (String::from_utf8(out).unwrap(), made.get())
        };
        let (first, n) = write(&[(1, 7, view("a", true)), (2, 7, view("b", true))]);
        assert_eq!(n, 2);
        assert_eq!(first, r#"{"items":[{"name":"a","up":true},{"name":"b","up":true}]}"#);
        // Same inputs: nothing made, the same bytes (the view given is not even looked at).
        let (again, n) = write(&[(1, 7, view("x", false)), (2, 7, view("y", false))]);
        assert_eq!((again.as_str(), n), (first.as_str(), 0));
        // Node 2's inputs changed, its view too; node 3 is new.
        let (next, n) = write(&[(1, 7, view("a", true)), (2, 8, view("b", false)), (3, 8, view("c", true))]);
        assert_eq!(n, 2);
        assert_eq!(
            next,
            r#"{"items":[{"name":"a","up":true},{"name":"b","up":false},{"name":"c","up":true}]}"#
        );
    }
}
