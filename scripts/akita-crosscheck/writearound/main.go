// Cycle checks for the Rust port of Akita v4.9.0's write-around cache
// (uvmsim crate, cycle/writearound.rs): the real writearound.Comp with
// MGPUSim's R9 Nano L1V parameters between a test source and an
// idealmemcontroller. Run with AKITA_TIE=fifo so same-cycle events run in
// insertion order, as the Rust engine does.
package main

import (
	"fmt"
	"hash/fnv"
	"math"
	"os"

	"github.com/sarchlab/akita/v4/mem/cache/writearound"
	"github.com/sarchlab/akita/v4/mem/idealmemcontroller"
	"github.com/sarchlab/akita/v4/mem/mem"
	"github.com/sarchlab/akita/v4/sim"
	"github.com/sarchlab/akita/v4/sim/directconnection"
)

func cyc(t sim.VTimeInSec) int64 { return int64(math.Round(float64(t) * 1e9)) }

type agent struct {
	*sim.TickingComponent
	port sim.Port
}

func (a *agent) Tick() bool {
	progress := false
	for a.port.RetrieveIncoming() != nil {
		progress = true
	}
	return progress
}

type sendEvent struct {
	*sim.EventBase
	msg sim.Msg
}

type sender struct{ a *agent }

func (s sender) Handle(e sim.Event) error {
	if err := s.a.port.Send(e.(sendEvent).msg); err != nil {
		panic("send failed")
	}
	return nil
}

// log records the cache's sends (top answers and bottom requests).
type log struct {
	e     sim.Engine
	side  string
	names map[string]string
	lines *[]string
}

func (h log) Func(ctx sim.HookCtx) {
	if ctx.Pos != sim.HookPosPortMsgSend {
		return
	}
	now := cyc(h.e.CurrentTime())
	var s string
	switch m := ctx.Item.(type) {
	case *mem.DataReadyRsp:
		s = fmt.Sprintf("%d %s DataReady %s", now, h.side, h.names[m.RespondTo])
	case *mem.WriteDoneRsp:
		s = fmt.Sprintf("%d %s WriteDone %s", now, h.side, h.names[m.RespondTo])
	case *mem.ReadReq:
		s = fmt.Sprintf("%d %s Read 0x%x", now, h.side, m.Address)
	case *mem.WriteReq:
		s = fmt.Sprintf("%d %s Write 0x%x", now, h.side, m.Address)
	}
	*h.lines = append(*h.lines, s)
}

type req struct {
	at      int64
	write   bool
	addr    uint64
	bytes   int
	canWait bool
}

func run(title string, memWidth, memBuf, latency int, reqs []req, quiet bool) {
	e := sim.NewSerialEngine()
	a := &agent{}
	a.TickingComponent = sim.NewTickingComponent("Agent", e, 1*sim.GHz, a)
	a.port = sim.NewPort(a, 1024, 1024, "Agent.Port")
	a.AddPort("Port", a.port)
	d := idealmemcontroller.MakeBuilder().WithEngine(e).WithFreq(1 * sim.GHz).
		WithLatency(latency).WithWidth(memWidth).WithTopBufSize(memBuf).
		WithNewStorage(64 * mem.MB).Build("DRAM")
	mapper := mem.NewInterleavedAddressPortMapper(128)
	mapper.LowModules = append(mapper.LowModules, d.GetPortByName("Top").AsRemote())
	c := writearound.MakeBuilder().WithEngine(e).WithFreq(1 * sim.GHz).
		WithBankLatency(20).WithNumBanks(4).WithLog2BlockSize(6).
		WithWayAssociativity(4).WithNumMSHREntry(128).WithNumReqsPerCycle(8).
		WithMaxNumConcurrentTrans(128).WithTotalByteSize(16 * mem.KB).
		WithAddressToPortMapper(mapper).Build("L1V")
	top := directconnection.MakeBuilder().WithEngine(e).WithFreq(1 * sim.GHz).Build("Top")
	top.PlugIn(c.GetPortByName("Top"))
	top.PlugIn(a.port)
	bot := directconnection.MakeBuilder().WithEngine(e).WithFreq(1 * sim.GHz).Build("Bottom")
	bot.PlugIn(c.GetPortByName("Bottom"))
	bot.PlugIn(d.GetPortByName("Top"))

	names := map[string]string{}
	lines := []string{}
	c.GetPortByName("Top").AcceptHook(log{e, "top", names, &lines})
	c.GetPortByName("Bottom").AcceptHook(log{e, "bottom", names, &lines})
	dst := c.GetPortByName("Top").AsRemote()
	for i, r := range reqs {
		var m sim.Msg
		if r.write {
			b := mem.WriteReqBuilder{}.WithSrc(a.port.AsRemote()).WithDst(dst).
				WithAddress(r.addr).WithData(make([]byte, r.bytes))
			if r.canWait {
				b = b.CanWaitForCoalesce()
			}
			m = b.Build()
		} else {
			b := mem.ReadReqBuilder{}.WithSrc(a.port.AsRemote()).WithDst(dst).
				WithAddress(r.addr).WithByteSize(uint64(r.bytes))
			if r.canWait {
				b = b.CanWaitForCoalesce()
			}
			m = b.Build()
		}
		names[m.Meta().ID] = fmt.Sprintf("r%d", i)
		e.Schedule(sendEvent{sim.NewEventBase(sim.VTimeInSec(float64(r.at)/1e9), sender{a}), m})
	}
	if err := e.Run(); err != nil {
		panic(err)
	}
	fmt.Println(title)
	h := fnv.New64a()
	for _, l := range lines {
		if !quiet {
			fmt.Println("  " + l)
		}
		h.Write([]byte(l + "\n"))
	}
	fmt.Printf("  events %d, last %s, fnv1a %#x\n", len(lines), lines[len(lines)-1], h.Sum64())
}

// lcg is the random source shared with the Rust test (same constants).
type lcg struct{ s uint64 }

func (g *lcg) next() uint64 {
	g.s = g.s*6364136223846793005 + 1442695040888963407
	return g.s >> 33
}

// randomWaves: waves of 1..4 requests of one kind (the last one not
// CanWaitForCoalesce), 3 requests a cycle from cycle 10, addresses over 12
// tags in sets 0..2 so victims, locks and MSHR hits all happen.
func randomWaves(seed uint64, n int) []req {
	g := &lcg{seed}
	reqs := []req{}
	for len(reqs) < n {
		size := int(g.next()%4) + 1
		write := g.next()%4 == 0
		for k := 0; k < size; k++ {
			i := len(reqs)
			addr := (g.next()%12)*4096 + (g.next()%3)*64 + (g.next()%16)*4
			bytes := 4
			if write && g.next()%2 == 0 {
				addr = addr / 64 * 64
				bytes = 64
			}
			reqs = append(reqs, req{int64(10 + i/3), write, addr, bytes, k != size-1})
		}
	}
	return reqs
}

func main() {
	run("s1: read miss at 10, read hit at 200", 1, 16, 100, []req{
		{10, false, 0x1000, 4, false}, {200, false, 0x1010, 4, false}}, false)
	run("s1b: read miss at 10, read at 120 waits for the fill's unlock", 1, 16, 100, []req{
		{10, false, 0x1000, 4, false}, {120, false, 0x1020, 4, false}}, false)
	run("s2: MSHR hit at 11; coalesced wave at 10", 1, 16, 100, []req{
		{10, false, 0x1000, 4, false}, {11, false, 0x1008, 4, false},
		{10, false, 0x3000, 4, true}, {10, false, 0x3004, 4, true}, {10, false, 0x3008, 4, false}}, false)
	run("s3: five lines of set 0 at 10", 1, 16, 100, []req{
		{10, false, 0x0, 4, false}, {10, false, 0x1000, 4, false}, {10, false, 0x2000, 4, false},
		{10, false, 0x3000, 4, false}, {10, false, 0x4000, 4, false}}, false)
	reqs := []req{}
	for j := 0; j < 129; j++ {
		reqs = append(reqs, req{10, false, uint64(j) * 64, 4, false})
	}
	run("s4: 129 reads at 10 (memory width 8, buffer 256)", 8, 256, 100, reqs, false)
	run("s5: write miss at 10, read at 200", 1, 16, 100, []req{
		{10, true, 0x2000, 64, false}, {200, false, 0x2000, 4, false}}, false)
	run("s5b: read at 10, write hit at 200, read at 201", 1, 16, 100, []req{
		{10, false, 0x4000, 4, false}, {200, true, 0x4008, 4, false}, {201, false, 0x4000, 4, false}}, false)
	run("s6: read miss at 10, write to the line at 11 (MSHR hit)", 1, 16, 100, []req{
		{10, false, 0x5000, 4, false}, {11, true, 0x5000, 4, false}}, false)
	verbose := len(os.Args) > 1
	run("r1: 600 random requests, seed 1, latency 30", 1, 16, 30, randomWaves(1, 600), !verbose)
	run("r2: 600 random requests, seed 7, latency 100, memory width 4", 4, 16, 100, randomWaves(7, 600), !verbose)
	// cycle/writearound.rs, a_fill_goes_to_the_bank_of_its_block_not_of_its_set: eight hits at 300 fill bank 0's
	// buffer; a fill of block 129 (bank 1) is answered at once, one of block 144 (bank 0) a tick later.
	for _, miss := range []uint64{0x1800, 0x900} {
		reqs := []req{}
		for k := 0; k < 8; k++ {
			reqs = append(reqs, req{10, false, uint64(k) * 0x100, 4, false})
		}
		reqs = append(reqs, req{11, false, 0x800, 4, false})
		reqs = append(reqs, req{199, false, miss, 4, false})
		for k := 0; k < 8; k++ {
			reqs = append(reqs, req{300, false, uint64(k) * 0x100, 4, false})
		}
		run(fmt.Sprintf("bank of a fill 0x%x", miss), 1, 16, 100, reqs, false)
	}
}
