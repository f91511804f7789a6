// lifecycle.mjs: Sandbox.create, getInfo, list, setTimeout, pause, connect
// (which resumes), kill, through E2B's SDK unchanged.
import { Sandbox, NotFoundError, SandboxNotFoundError } from 'e2b'
import { assert, check, rejection, template } from './check.mjs'

const tag = `t${process.pid}`
let sbx

await check('Sandbox.create with template, timeout, metadata and envs', async () => {
  sbx = await Sandbox.create(template, {
    timeoutMs: 120_000, metadata: { run: tag, purpose: 'lifecycle' }, envs: { GREETING: 'hello from env' },
  })
  assert.match(sbx.sandboxId, /^[a-z2-7]{12}$/)
  const r = await sbx.commands.run('echo "$GREETING"')
  assert.equal(r.stdout, 'hello from env\n')
})

await check('getInfo says its template, metadata, state and end', async () => {
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, template)
  assert.deepEqual(info.metadata, { run: tag, purpose: 'lifecycle' })
  assert.equal(info.state, 'running')
  const left = info.endAt.getTime() - Date.now()
  assert.ok(left > 60_000 && left <= 121_000, `endAt in ${left} ms`)
})

await check('Sandbox.list finds it by metadata, and only it', async () => {
  const found = await Sandbox.list({ query: { metadata: { run: tag } } }).nextItems()
  assert.deepEqual(found.map(s => s.sandboxId), [sbx.sandboxId])
  assert.equal(found[0].state, 'running')
  const none = await Sandbox.list({ query: { metadata: { run: 'no-such-run' } } }).nextItems()
  assert.equal(none.length, 0)
})

await check('setTimeout moves its end', async () => {
  await sbx.setTimeout(600_000)
  const left = (await sbx.getInfo()).endAt.getTime() - Date.now()
  assert.ok(left > 500_000, `endAt in ${left} ms`)
})

await check('pause: paused, listed as paused, and a second pause says so', async () => {
  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  const paused = await Sandbox.list({ query: { state: ['paused'], metadata: { run: tag } } }).nextItems()
  assert.deepEqual(paused.map(s => s.sandboxId), [sbx.sandboxId])
  assert.equal(await Sandbox.pause(sbx.sandboxId), false)
})

await check('Sandbox.connect resumes it, with its files and processes', async () => {
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 })
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal((await again.commands.run('echo "$GREETING"; echo back')).stdout, 'hello from env\nback\n')
})

await check('kill: gone, a second kill says false, getInfo is not found', async () => {
  await sbx.kill()
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  const err = await rejection(Sandbox.getInfo(sbx.sandboxId))
  assert.ok(err instanceof SandboxNotFoundError || err instanceof NotFoundError, err.constructor.name)
  const found = await Sandbox.list({ query: { metadata: { run: tag } } }).nextItems()
  assert.equal(found.length, 0)
})

await check('a sandbox whose timeout passes is killed', async () => {
  const short = await Sandbox.create(template, { timeoutMs: 2_000, metadata: { run: tag } })
  const until = Date.now() + 30_000
  let gone = false
  while (!gone && Date.now() < until) {
    await new Promise(r => setTimeout(r, 500))
    gone = (await Sandbox.list({ query: { metadata: { run: tag } } }).nextItems()).length === 0
  }
  assert.ok(gone, `${short.sandboxId} still listed 30 s after its 2 s timeout`)
})
