//! Dealers (Accelerate's BatchSamplerShard, IterableDatasetShard and dispatcher slicing): Accelerate's
//! vectors, the dispatch's remainder, and bad settings and misuse refused.
use accel::{sys, Dealer};

/// Everything `dealer` yields for these base batches, then at the end of the epoch.
fn deal_all(dealer: &mut Dealer, base_batches: &[Vec<i64>]) -> Vec<Vec<i64>> {
    let mut dealt = Vec::new();
    for batch in base_batches {
        dealt.extend(dealer.push(batch).unwrap());
    }
    dealt.extend(dealer.finish().unwrap());
    dealt
}

#[test]
fn a_shard_deals_accelerates_batches() {
    // BatchSamplerShard(BatchSampler(range(21), 3), 2 processes): rank 1's last batch is padded from the start.
    let base: Vec<Vec<i64>> = (0..7).map(|batch| (batch * 3..batch * 3 + 3).collect()).collect();
    let mut dealer = Dealer::shard(Some(3), false, 2, 1, false, true).unwrap();
    assert_eq!(deal_all(&mut dealer, &base), [vec![3, 4, 5], vec![9, 10, 11], vec![15, 16, 17], vec![0, 1, 2]]);
    assert_eq!(dealer.length(7, 3).unwrap(), 4);
    assert_eq!(dealer.remainder().unwrap(), None);
}

#[test]
fn an_iterable_shard_pads_the_last_global_batch_from_the_first() {
    let stream: Vec<Vec<i64>> = (0..7).map(|position| vec![position]).collect();
    let mut dealer = Dealer::iterable(2, false, 2, 1, false).unwrap();
    assert_eq!(deal_all(&mut dealer, &stream), [vec![2, 3], vec![6, 0]]);
    assert_eq!(dealer.length(7, 0).unwrap(), 2);
}

#[test]
fn a_dispatch_holds_its_last_step_until_the_epoch_ends_and_reports_the_remainder() {
    let mut dealer = Dealer::dispatch(2, 0, false, false).unwrap();
    assert!(dealer.push(&[0, 1, 2]).unwrap().is_empty());
    assert!(dealer.push(&[3, 4, 5]).unwrap().is_empty());
    assert!(dealer.push(&[6, 7, 8]).unwrap().is_empty());
    assert_eq!(dealer.push(&[9]).unwrap(), [vec![0, 1, 2]]);
    assert_eq!(dealer.finish().unwrap(), [vec![6, 7]]);
    assert_eq!(dealer.remainder().unwrap(), Some(4));
    assert_eq!(dealer.length(4, 0).unwrap(), 2);
}

#[test]
fn bad_settings_and_misuse_are_refused_naming_the_problem() {
    let error = Dealer::shard(Some(3), false, 2, 5, false, true).err().expect("refused");
    assert_eq!(error.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert!(error.message().contains("process_index"), "{}", error);
    let mut dealer = Dealer::shard(Some(2), false, 1, 0, false, true).unwrap();
    assert_eq!(dealer.push(&[0, 1, 2]).expect_err("refused").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    dealer.finish().unwrap();
    assert_eq!(dealer.push(&[0]).expect_err("refused").code(), sys::ACCEL_ERR_INVALID_STATE);
    assert_eq!(dealer.finish().expect_err("refused").code(), sys::ACCEL_ERR_INVALID_STATE);
}
