// Cycle checks for the Rust port of Akita v4.9.0's PCIe network
// (noc/networking/pcie: endpoints, switches, direct connections) together with
// the real MMU (mem/vm/mmu), wired as MGPUSim v4.2.0 wires one R9 Nano GPU
// (amd/samples/runner/timingconfig/builder.go). A generator "Gen" on the GPU
// side sends vm.TranslationReqs to the MMU's Top port on the CPU side. Run
// with AKITA_TIE=fifo so same-cycle events run in insertion order, as the Rust
// engine does.
//
// Output, one line per request: scenario i send mmu_recv mmu_take rsp_recv
// rsp_seen (cycles), then "# scenario n=.. digest=.." per scenario.
package main

import (
	"fmt"
	"math"

	"github.com/sarchlab/akita/v4/mem/vm"
	"github.com/sarchlab/akita/v4/mem/vm/mmu"
	"github.com/sarchlab/akita/v4/noc/networking/pcie"
	"github.com/sarchlab/akita/v4/sim"
)

func cyc(t sim.VTimeInSec) int64 { return int64(math.Round(float64(t) * 1e9)) }

// req is one scripted request: send at cycle `at` (or later), page k.
type req struct{ at, k int64 }

// rec holds the cycles of one request (-1 = not seen).
type rec struct{ send, mmuRecv, mmuTake, rspRecv, rspSeen int64 }

// dummy owns the idle ports (it never sends and never receives).
type dummy struct{ *sim.TickingComponent }

func (d *dummy) Tick() bool { return false }

func newDummy(name string, e sim.Engine, ports ...string) (*dummy, []sim.Port) {
	d := &dummy{}
	d.TickingComponent = sim.NewTickingComponent(name, e, 1*sim.GHz, d)
	ps := []sim.Port{}
	for _, p := range ports {
		port := sim.NewPort(d, 4, 4, name+"."+p)
		d.AddPort(p, port)
		ps = append(ps, port)
	}
	return d, ps
}

// gen is the request generator. NotifyRecv/NotifyPortFree keep
// TickingComponent's defaults (TickLater).
type gen struct {
	*sim.TickingComponent
	bottom sim.Port
	mmuTop sim.RemotePort
	reqs   []req
	next   int
	recs   []rec
	index  map[string]int // request ID -> request index
}

func (g *gen) Tick() bool {
	now := cyc(g.CurrentTime())
	progress := false
	// 1. take every incoming response.
	for {
		m := g.bottom.RetrieveIncoming()
		if m == nil {
			break
		}
		g.recs[g.index[m.(*vm.TranslationRsp).RespondTo]].rspSeen = now
		progress = true
	}
	// 2. send every due request while the port accepts.
	for g.next < len(g.reqs) && g.reqs[g.next].at <= now {
		r := vm.TranslationReqBuilder{}.WithSrc(g.bottom.AsRemote()).
			WithDst(g.mmuTop).WithPID(1).WithVAddr(uint64(0x1000 * g.reqs[g.next].k)).
			WithDeviceID(1).Build()
		if g.bottom.Send(r) != nil {
			break
		}
		g.index[r.ID] = g.next
		g.recs[g.next].send = now
		g.next++
		progress = true
	}
	return progress
}

// wake is the custom event that calls gen.TickNow() at a request cycle.
type wake struct{ g *gen }

func (w wake) Handle(sim.Event) error { w.g.TickNow(); return nil }

// hook records port events into the generator's records.
type hook struct {
	g     *gen
	e     sim.Engine
	isMMU bool
}

func (h *hook) Func(ctx sim.HookCtx) {
	now := cyc(h.e.CurrentTime())
	if h.isMMU { // MMU Top: requests delivered / retrieved
		r, ok := ctx.Item.(*vm.TranslationReq)
		if !ok {
			return
		}
		switch ctx.Pos {
		case sim.HookPosPortMsgRecvd:
			h.g.recs[h.g.index[r.ID]].mmuRecv = now
		case sim.HookPosPortMsgRetrieveIncoming:
			h.g.recs[h.g.index[r.ID]].mmuTake = now
		}
		return
	}
	if r, ok := ctx.Item.(*vm.TranslationRsp); ok && ctx.Pos == sim.HookPosPortMsgRecvd {
		h.g.recs[h.g.index[r.RespondTo]].rspRecv = now
	}
}

func run(name string, reqs []req) {
	e := sim.NewSerialEngine()

	pt := vm.NewPageTable(12)
	for k := uint64(1); k <= 4096; k++ {
		pt.Insert(vm.Page{PID: 1, VAddr: 0x1000 * k, PAddr: 0x100000000 + 0x1000*k,
			PageSize: 4096, Valid: true})
	}
	m := mmu.MakeBuilder().WithEngine(e).WithFreq(1 * sim.GHz).
		WithPageWalkingLatency(100).WithLog2PageSize(12).WithPageTable(pt).Build("MMU")
	_, drv := newDummy("Driver", e, "GPU", "MMU")
	_, gpuIdle := newDummy("GPUIdle", e, "P0", "P1")

	g := &gen{reqs: reqs, recs: make([]rec, len(reqs)), index: map[string]int{}}
	g.TickingComponent = sim.NewTickingComponent("Gen", e, 1*sim.GHz, g)
	g.bottom = sim.NewPort(g, 64, 64, "Gen.Bottom")
	g.AddPort("Bottom", g.bottom)
	g.mmuTop = m.GetPortByName("Top").AsRemote()
	for i := range g.recs {
		g.recs[i] = rec{-1, -1, -1, -1, -1}
	}

	// MGPUSim's PCIe wiring: root complex with the driver's and the MMU's
	// ports, one switch under it, the GPU's ports on that switch. The MMU's
	// Migration port is the real one (it never sends here: pages are not
	// Unified, so no migration).
	c := pcie.NewConnector().WithEngine(e).WithVersion(4, 16).WithSwitchLatency(140)
	c.CreateNetwork("PCIe")
	root := c.AddRootComplex([]sim.Port{drv[0], drv[1],
		m.GetPortByName("Migration"), m.GetPortByName("Top")})
	sw := c.AddSwitch(root)
	c.PlugInDevice(sw, []sim.Port{gpuIdle[0], gpuIdle[1], g.bottom})
	c.EstablishRoute()

	m.GetPortByName("Top").AcceptHook(&hook{g, e, true})
	g.bottom.AcceptHook(&hook{g, e, false})

	// One wake-up event per distinct request cycle, in increasing order.
	last := int64(-1)
	for _, r := range reqs {
		if r.at != last {
			e.Schedule(sim.NewEventBase(sim.VTimeInSec(float64(r.at)/1e9), wake{g}))
			last = r.at
		}
	}
	if err := e.Run(); err != nil {
		panic(err)
	}

	var digest uint64
	for i, r := range g.recs {
		fmt.Printf("%s %d %d %d %d %d %d\n", name, i, r.send, r.mmuRecv, r.mmuTake, r.rspRecv, r.rspSeen)
		digest += uint64(i+1) * uint64(r.rspSeen)
	}
	fmt.Printf("# %s n=%d digest=%d\n", name, len(reqs), digest)
}

func main() {
	run("single", []req{{10, 1}})

	train := []req{}
	for i := int64(0); i < 200; i++ {
		train = append(train, req{10 + 3*i, i + 1})
	}
	run("train", train)

	burst := []req{}
	for i := int64(0); i < 300; i++ {
		burst = append(burst, req{10, i + 1})
	}
	run("burst", burst)

	// xorshift64 gaps of 0..20 cycles from cycle 10.
	random := []req{}
	state, t := uint64(1), uint64(10)
	for i := int64(0); i < 2000; i++ {
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		t += state % 21
		random = append(random, req{int64(t), i%4096 + 1})
	}
	run("random", random)
}
