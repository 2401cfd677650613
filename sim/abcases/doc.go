// Package abcases is one table of A/B boot cases (cases.yaml, embedded)
// and the runner that plays it against any machine with an A/B disk:
// sim/disk's model ([Model]) or a real VM whose GRUB decides (sim/vm's
// tests). The model and the real disk must give the same trace, step by
// step; each step also says what must happen, so agreeing on a wrong
// answer fails too.
//
// A [Case] starts from a factory disk (an image committed in slot A, or
// blank) and lists [Step]s: boot, stage, stage-cut (the power cut while
// the write is under way), activate, commit, rollback, reset (recovery
// once) and clean. A boot says what must boot (source, slot, trial,
// image); any step may say what each slot must hold after it ([Summary]:
// its state, or committed, with the tries left). The cases cover a
// committed slot that keeps booting; a trial and its commit; a failed
// health check falling back after one try, and after two; a power cut
// mid-write; a rollback; a blank disk that boots recovery, which installs
// slot A; a one-time recovery boot; and a reset's cleaning.
//
// [Run] plays a case on a [Machine], fails at the first step whose outcome
// is not the table's, naming the case, the step and both outcomes, and
// returns the [Trace]. [Model] starts from sim/vm/diskimage's FactoryState, the
// state the real disks are built with, so both machines start alike.
// [Cases] decodes the table strictly (internal/specfile).
package abcases
