//! Akita v4.9.0's `pipelining` package: `width` lanes of `stages` stages, one
//! cycle per stage here (every MGPUSim pipeline on this path has
//! `WithCyclePerStage(1)`), and a post-pipeline buffer owned by the caller.
//!
//! The lane order is kept: an item enters the lowest lane whose first stage
//! is free, and each tick moves lanes in lane order, last stage first. After
//! a stall this reorders items (docs/validation.md, "The lookup pipeline
//! reorders"), which a first-in first-out model does not.

use super::core::Buffer;

#[derive(Clone, Debug)]
struct Slot<T> {
    item: Option<T>,
    left: u32,
}

/// A pipeline of `T` (Akita `pipelining.Pipeline`).
#[derive(Clone, Debug)]
pub struct Pipeline<T> {
    stages: usize,
    /// `lanes[lane][stage]`.
    lanes: Vec<Vec<Slot<T>>>,
}

impl<T> Pipeline<T> {
    pub fn new(width: usize, stages: usize) -> Self {
        let lanes = (0..width).map(|_| (0..stages).map(|_| Slot { item: None, left: 0 }).collect()).collect();
        Self { stages, lanes }
    }

    /// Akita `CanAccept`: a lane's first stage is free (or, with no stage,
    /// the post-pipeline buffer has room).
    pub fn can_accept(&self, post: &Buffer<T>) -> bool {
        if self.stages == 0 {
            return post.can_push();
        }
        self.lanes.iter().any(|l| l[0].item.is_none())
    }

    /// Akita `Accept`: the lowest free lane (straight into the buffer with no stage).
    pub fn accept(&mut self, item: T, post: &mut Buffer<T>) {
        if self.stages == 0 {
            post.push(item);
            return;
        }
        let lane = self.lanes.iter_mut().find(|l| l[0].item.is_none()).expect("pipeline is not free");
        lane[0] = Slot { item: Some(item), left: 0 };
    }

    /// Akita `Tick`: every lane in order, last stage first; an item in the
    /// last stage moves to the buffer if it has room.
    pub fn tick(&mut self, post: &mut Buffer<T>) -> bool {
        let mut progress = false;
        let last = self.stages.wrapping_sub(1);
        for lane in self.lanes.iter_mut() {
            for i in (0..self.stages).rev() {
                if lane[i].item.is_none() {
                    continue;
                }
                if lane[i].left > 0 {
                    lane[i].left -= 1;
                    progress = true;
                    continue;
                }
                if i == last {
                    if post.can_push() {
                        post.push(lane[i].item.take().expect("checked"));
                        progress = true;
                    }
                } else if lane[i + 1].item.is_none() {
                    let item = lane[i].item.take();
                    lane[i + 1] = Slot { item, left: 0 };
                    progress = true;
                }
            }
        }
        progress
    }

    /// Items in the stages (for checks).
    pub fn len(&self) -> usize {
        self.lanes.iter().map(|l| l.iter().filter(|s| s.item.is_some()).count()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One stage: accepted in tick t (after the pipeline's own tick, as the
    /// TLB does), in the buffer at the tick of t + 1.
    #[test]
    fn an_item_leaves_a_one_stage_pipeline_at_the_next_tick() {
        let mut p = Pipeline::new(2, 1);
        let mut buf = Buffer::new(4);
        assert!(!p.tick(&mut buf));
        p.accept(7, &mut buf);
        assert!(buf.is_empty());
        assert!(p.tick(&mut buf));
        assert_eq!(buf.pop(), Some(7));
    }

    /// Four stages take four ticks from the first stage to the buffer.
    #[test]
    fn an_item_moves_one_stage_per_tick() {
        let mut p = Pipeline::new(1, 4);
        let mut buf = Buffer::new(4);
        p.accept(1, &mut buf);
        for _ in 0..3 {
            p.tick(&mut buf);
            assert!(buf.is_empty());
        }
        p.tick(&mut buf);
        assert_eq!(buf.pop(), Some(1));
    }

    /// After a stall the lowest lanes leave first, whatever their arrival:
    /// items 1 (lane 0) and 2 (lane 1) wait on a full buffer; 1 leaves, lane
    /// 0 takes 3, and 3 overtakes 2 once it reaches the last stage.
    #[test]
    fn lanes_leave_in_lane_order_after_a_stall() {
        let mut p = Pipeline::new(2, 1);
        let mut buf = Buffer::new(1);
        p.accept(1, &mut buf);
        p.accept(2, &mut buf);
        p.tick(&mut buf); // 1 -> buf; 2 waits
        assert_eq!(buf.pop(), Some(1));
        p.accept(3, &mut buf); // lane 0
        p.tick(&mut buf); // lane 0 first: 3 -> buf
        assert_eq!(buf.pop(), Some(3));
        p.tick(&mut buf);
        assert_eq!(buf.pop(), Some(2));
    }
}
