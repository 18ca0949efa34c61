//! The kernel of docs/machine-model.md ("Writing a kernel") is real: `examples/sum_records.rs`
//! must be the document's Rust block line for line, and it must run and write the right sums.

mod common;

// The document's block, kept apart from this file so that rustfmt leaves its layout alone
// (it does not format what `include!` brings in).
include!("examples/sum_records.rs");

/// The Rust block of `markdown` ("```rust" to "```").
fn rust_block(markdown: &str) -> Vec<&str> {
    let mut lines = markdown.lines().skip_while(|l| *l != "```rust").skip(1);
    let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
    assert!(!block.is_empty(), "the document has a Rust block");
    block
}

#[test]
fn the_documents_kernel_is_this_one() {
    let doc = include_str!("../docs/machine-model.md");
    let ours: Vec<&str> = include_str!("examples/sum_records.rs").lines().collect();
    assert_eq!(rust_block(doc), ours);
}

#[test]
fn the_documents_kernel_writes_each_records_sum() {
    let records = 100u64;
    let m = common::machine(&[]);
    let mut dpu = pimdes::dpu::Dpu::new(&m.dpu, 0);
    let words: Vec<u64> = (0..records * 32).map(|w| w * w + 7).collect();
    dpu.mram_mut().write_u64s(0, &words);
    let report = dpu.launch(&SumRecords { records }, 11).unwrap();
    let sums = dpu.mram().read_u64s(1 << 20, records as usize);
    for (i, &sum) in sums.iter().enumerate() {
        let n = 2 * (i % 15) + 1;
        let want: u64 = words[i * 32..i * 32 + n].iter().sum();
        assert_eq!(sum, want, "record {i}");
    }
    assert_eq!(report.stats.dma_reads, records);
    assert_eq!(report.stats.dma_writes, records);
}
