//! The parallel scheduler of a rotation's key switch: the digits' residues are produced and
//! consumed by whichever thread gets to them first (`RotTasks`), so two threads share one
//! rotation without a barrier between decomposition and inner products.
use super::*;

/// Waits until `flag` is set by the thread producing the data it guards. Only called for work
/// that another thread has claimed and is running to completion without waiting itself, so it
/// always ends — unless that task panicked, which `failed` reports (the panic then propagates
/// here too instead of leaving this thread spinning).
pub(super) fn wait_for(flag: &AtomicBool, failed: &AtomicBool) {
    wait_until(|| flag.load(Ordering::Acquire), failed);
}

/// Spins (then yields) until `ready()`; see `wait_for`.
pub(super) fn wait_until(ready: impl Fn() -> bool, failed: &AtomicBool) {
    let mut spins = 0u32;
    while !ready() {
        assert!(
            !failed.load(Ordering::Acquire),
            "a key-switching task panicked on another thread"
        );
        if spins < 2000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// `RwLock` access that, like [`locked`], recovers the guard of a poisoned lock.
pub(super) fn written<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

/// See [`written`].
pub(super) fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic in another task poisons the lock; the data is then discarded by that panic
    // anyway, so recovering the guard is sound.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Shared state of one plain rotation split into tasks: L limb decompositions, then the two
/// output components. Digit residue (i, k) (digit of limb i, modulus k) lives in its own
/// buffer with a ready flag, so a component can start on the P residues while the other
/// thread is still transforming a Q residue.
pub(super) struct RotTasks<'a> {
    params: &'a Params,
    c0: &'a [u64],
    c1: &'a [u64],
    keys: [KeyPair<'a>; 2],
    perms: &'a GaloisPerms,
    next: AtomicUsize,
    /// Tasks finished (see `work`).
    done: AtomicUsize,
    /// Digit residue (i, k): taken by the thread that computes limb i from its own pool and
    /// given back to that pool once every task has finished (see `work`), so that a thread
    /// writes buffers its own cache last held instead of ones the other core used.
    /// An `RwLock`: once ready, a residue is only read, by both components at once (a
    /// `Mutex` made the second one sleep in the kernel until the first finished its product).
    res: Vec<RwLock<Vec<u32>>>,
    ready: Vec<AtomicBool>,
    /// Set when a task panics (see `wait_for`).
    failed: AtomicBool,
    /// The two output components, each set by the task that computes it.
    out: [Mutex<Vec<u64>>; 2],
}

/// Sets `failed` if dropped while its thread unwinds from a panic.
pub(super) struct PanicFlag<'a>(&'a AtomicBool);

impl Drop for PanicFlag<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

impl RotTasks<'_> {
    /// Claims and runs tasks until none is left (every participating thread runs this).
    fn work(&self) {
        let l = self.params.l();
        let _flag = PanicFlag(&self.failed);
        // Limbs this thread decomposed (bit i; L ≤ 2): their residue buffers go back to its
        // pool.
        let mut mine = 0u64;
        loop {
            let t = self.next.fetch_add(1, Ordering::AcqRel);
            if t < l {
                self.limb(t);
                mine |= 1 << t;
            } else if t < l + 2 {
                self.component(t - l);
            } else {
                break;
            }
            self.done.fetch_add(1, Ordering::AcqRel);
        }
        if mine == 0 {
            return;
        }
        // The other thread's component may still read them: wait until every task is done
        // (the tasks left are running on the other thread and never wait for this one).
        wait_until(|| self.done.load(Ordering::Acquire) == l + 2, &self.failed);
        for i in (0..l).filter(|&i| mine & (1 << i) != 0) {
            for k in 0..=l {
                give32(std::mem::take(&mut *written(&self.res[self.idx(i, k)])));
            }
        }
    }

    fn idx(&self, i: usize, k: usize) -> usize {
        i * (self.params.l() + 1) + k
    }

    /// The centered digit of limb i in NTT form modulo every prime of Q·P: its own residue is
    /// c1's; the others are one inverse NTT, a scaled lift and a forward NTT each (P first:
    /// both components start with it).
    fn limb(&self, i: usize) {
        let params = self.params;
        let n = params.n();
        let l = params.l();
        let ks = ks(params);
        let qi = ks.m[i];
        let mut coef_buf = take32a(n);
        let coef = win_mut(&mut coef_buf, n);
        for k in 0..=l {
            *written(&self.res[self.idx(i, k)]) = take32a(n);
        }
        {
            let mut own = written(&self.res[self.idx(i, i)]);
            narrow2(win_mut(&mut own, n), coef, &self.c1[i * n..(i + 1) * n]);
        }
        self.ready[self.idx(i, i)].store(true, Ordering::Release);
        plan(params, i).inv(coef);
        let (ni, nis) = ks.n_inv[i];
        // P first: both components start with it.
        let targets: Vec<usize> = std::iter::once(l)
            .chain((0..l).filter(|&k| k != i))
            .collect();
        let mut guards: Vec<_> = targets
            .iter()
            .map(|&k| written(&self.res[self.idx(i, k)]))
            .collect();
        if let [g1, g2] = &mut guards[..] {
            let (s1, s2) = (
                ks.m[targets[0]].wrapping_sub(qi),
                ks.m[targets[1]].wrapping_sub(qi),
            );
            scale_lift2(win_mut(g1, n), win_mut(g2, n), coef, ni, nis, qi, s1, s2);
        } else {
            for (g, &k) in guards.iter_mut().zip(&targets) {
                scale_lift(win_mut(g, n), coef, ni, nis, qi, ks.m[k].wrapping_sub(qi));
            }
        }
        for (g, &k) in guards.into_iter().zip(&targets) {
            let mut g = g;
            plan(params, k).fwd(win_mut(&mut g, n));
            drop(g);
            self.ready[self.idx(i, k)].store(true, Ordering::Release);
        }
        give32(coef_buf);
    }

    fn component(&self, c: usize) {
        let params = self.params;
        let l = params.l();
        let n = params.n();
        let with_res = |k: usize, f: &mut dyn FnMut(&Residues<'_>)| {
            for i in 0..l {
                wait_for(&self.ready[self.idx(i, k)], &self.failed);
            }
            let guards: Vec<_> = (0..l).map(|i| read(&self.res[self.idx(i, k)])).collect();
            let d: Residues<'_> = guards.iter().map(|g| win(g, n)).collect();
            f(&d);
        };
        let (key, key_s) = self.keys[c];
        // The output is taken from the pool of the thread that writes it: a buffer the other
        // core used last would cost a cross-core transfer per cache line (every word is
        // written by the gathers: no zeroing).
        let mut out = crate::bfv::take_dirty(l * n);
        let c0 = (c == 0).then_some(self.c0);
        component(params, &with_res, key, key_s, self.perms, c0, &mut out);
        *locked(&self.out[c]) = out;
    }
}

/// Plain rotation (Perm): (σ_g(c0) + KS_b, KS_a) with one centered digit per Q limb. The L
/// limb decompositions and the two output components are tasks claimed in that order by
/// whichever thread is free; with two threads a single `rayon::join` covers the whole
/// rotation (each thread typically decomposes one limb, then finishes one component, picking
/// up the other limb's residues as they become ready). The result does not depend on which
/// thread ran what (`tests::rotate_limbs_two_threads_bit_exact`).
pub(crate) fn rotate_limbs(
    params: &Params,
    c0: &[u64],
    c1: &[u64],
    key_b: &[&[u32]],
    key_a: &[&[u32]],
    key_bs: &[&[u32]],
    key_as: &[&[u32]],
    perms: &GaloisPerms,
) -> (Vec<u64>, Vec<u64>) {
    let l = params.l();
    let cells = l * (l + 1);
    let tasks = RotTasks {
        params,
        c0,
        c1,
        keys: [(key_b, key_bs), (key_a, key_as)],
        perms,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        res: (0..cells).map(|_| RwLock::new(Vec::new())).collect(),
        ready: (0..cells).map(|_| AtomicBool::new(false)).collect(),
        failed: AtomicBool::new(false),
        out: [Mutex::new(Vec::new()), Mutex::new(Vec::new())],
    };
    if rayon::current_num_threads() > 1 {
        rayon::join(|| tasks.work(), || tasks.work());
    } else {
        tasks.work();
    }
    let RotTasks { res, out, .. } = tasks;
    for r in res {
        give32(r.into_inner().unwrap_or_else(|e| e.into_inner()));
    }
    let [o0, o1] = out.map(|o| o.into_inner().unwrap_or_else(|e| e.into_inner()));
    (o0, o1)
}
