use pimdes::dpu::{Kernel, KernelError, Op, Tasklet};

struct SumRecords { records: u64 }

impl Kernel for SumRecords {
    fn wram_globals_bytes(&self) -> u32 { 8 }             // uint64_t next;

    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(2048)?;                      // mem_alloc(2048)
        let next = t.globals();
        let mut words = [0u64; 256];
        loop {
            t.mutex_lock(0).await?;                        // mutex_lock(m)
            let i = t.wram_read_u64(next)?;
            t.wram_write_u64(next, i + 1)?;
            t.mutex_unlock(0).await?;
            if i >= self.records { return Ok(()); }
            let size = 16 * (i % 15) as u32 + 8;           // a 16k+8-byte node
            t.mram_read(i * 256, buf, size).await?;        // mram_read(from, to, size)
            let n = (size / 8) as usize;
            t.wram_read_u64s(buf, &mut words[..n])?;
            let sum = words[..n].iter().fold(0u64, |a, &w| a.wrapping_add(w));
            t.op(Op::AddI64, n as u64).await?;             // what the loop costs
            t.wram_write_u64(buf, sum)?;
            t.mram_write(buf, (1 << 20) + i * 8, 8).await?;
        }
    }
}
