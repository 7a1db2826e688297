//! Graph execution with the intermediate values in a [`heloom_store::Store`]: the job inputs
//! and every task output live in the store under a memory budget, and the graph's execution
//! order is the store's access order, so values needed last are the ones spilled and values
//! needed next are prefetched.

use crate::graph::{GraphError, NodeId, Result, TaskGraph};
use heloom_ckks::PolyOps;
use heloom_store::{Spill, Store, StoreError};
use std::cell::RefCell;

fn store_err(e: StoreError) -> GraphError {
    GraphError::Invalid(format!("value store: {e}"))
}

impl TaskGraph {
    /// The gets [`TaskGraph::run_with_store`] makes, in order: for each task, the operands it
    /// reads from outside itself (job inputs, earlier tasks' outputs), then the outputs.
    pub fn store_access_order(&self) -> Vec<NodeId> {
        let mut order = Vec::new();
        for task in self.tasks() {
            for (pos, &v) in task.nodes.iter().enumerate() {
                for o in self.nodes()[v].op.operands() {
                    if !task.nodes[..pos].contains(&o) {
                        order.push(o);
                    }
                }
            }
        }
        order.extend_from_slice(self.outputs());
        order
    }

    /// Runs the graph like [`TaskGraph::run`] (bit-identical results), with the job inputs and
    /// task outputs kept in `store` under the node ids as keys, the graph's execution order
    /// set as the store's access order, and each value discarded after its last use. With a
    /// small budget, values spill to disk and come back by prefetch; see
    /// [`heloom_store::Store::stats`] for what was read and written.
    ///
    /// The store must be one of its own for the run (its keys are node ids; the run replaces
    /// and then discards them). Its loader turns [`Spill::to_spill`] bytes back into a
    /// ciphertext (for the CPU evaluator, `Ciphertext::from_bytes` with the context).
    pub fn run_with_store<O: PolyOps>(
        &self,
        ev: &O,
        inputs: &[O::Ct],
        store: &Store<O::Ct>,
    ) -> Result<Vec<O::Ct>>
    where
        O::Ct: Spill,
    {
        self.check_inputs(inputs.iter().map(|c| (ev.level_of(c), ev.scale_of(c))))?;
        let order = self.store_access_order();
        let mut uses_left = vec![0usize; self.nodes().len()];
        for &v in &order {
            uses_left[v] += 1;
        }
        let keys: Vec<u64> = order.iter().map(|&v| v as u64).collect();
        store.set_access_order(&keys);
        for (i, &node) in self.input_nodes().iter().enumerate() {
            store
                .insert(node as u64, inputs[i].clone())
                .map_err(store_err)?;
        }
        let error: RefCell<Option<StoreError>> = RefCell::new(None);
        let fetch = |o: NodeId| match store.get(o as u64) {
            Ok(v) => Some(v),
            Err(e) => {
                error.borrow_mut().get_or_insert(e);
                None
            }
        };
        let release = |v: NodeId, uses_left: &mut [usize]| {
            uses_left[v] = uses_left[v].saturating_sub(1);
            if uses_left[v] == 0 {
                store.discard(v as u64);
            }
        };
        for (t, task) in self.tasks().iter().enumerate() {
            let out = self.run_task(t, ev, &fetch);
            if let Some(e) = error.borrow_mut().take() {
                return Err(store_err(e));
            }
            let out = out?;
            if uses_left[task.output] > 0 {
                store.insert(task.output as u64, out).map_err(store_err)?;
            }
            for (pos, &v) in task.nodes.iter().enumerate() {
                for o in self.nodes()[v].op.operands() {
                    if !task.nodes[..pos].contains(&o) {
                        release(o, &mut uses_left);
                    }
                }
            }
        }
        let mut outs = Vec::with_capacity(self.outputs().len());
        for &o in self.outputs() {
            let v = store.get(o as u64).map_err(store_err)?;
            release(o, &mut uses_left);
            outs.push(std::sync::Arc::unwrap_or_clone(v));
        }
        store.set_access_order(&[]);
        Ok(outs)
    }
}
