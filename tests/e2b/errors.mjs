// errors.mjs: what E2B's SDK makes of this server's refusals: a wrong key,
// another tenant's sandbox, a quota, a call this server does not have.
// SPACE_E2B_OTHER_KEY is another tenant's key; SPACE_E2B_QUOTA_KEY one of
// a tenant whose quota is one running sandbox.
import { Sandbox, AuthenticationError, NotFoundError, SandboxNotFoundError, RateLimitError, SandboxError } from 'e2b'
import { assert, check, rejection, template } from './check.mjs'

const other = { apiKey: process.env.SPACE_E2B_OTHER_KEY }
const mine = await Sandbox.create(template, { timeoutMs: 120_000 })

await check('a wrong key is AuthenticationError', async () => {
  const err = await rejection(Sandbox.list({ apiKey: 'spk_0000000000000000_' + '0'.repeat(64) }).nextItems())
  assert.ok(err instanceof AuthenticationError, err.constructor.name)
})

await check("another tenant's sandbox is not found, and not listed", async () => {
  const err = await rejection(Sandbox.getInfo(mine.sandboxId, other))
  assert.ok(err instanceof SandboxNotFoundError || err instanceof NotFoundError, err.constructor.name)
  assert.equal(await Sandbox.kill(mine.sandboxId, other), false)
  const theirs = await Sandbox.list(other).nextItems()
  assert.ok(!theirs.some(s => s.sandboxId === mine.sandboxId))
  const connectErr = await rejection(Sandbox.connect(mine.sandboxId, other))
  assert.ok(connectErr instanceof SandboxNotFoundError || connectErr instanceof NotFoundError, connectErr.constructor.name)
  assert.equal((await mine.commands.run('echo still mine')).stdout, 'still mine\n')
})

await check('a quota of one running sandbox: the second create is refused', async () => {
  const q = { apiKey: process.env.SPACE_E2B_QUOTA_KEY }
  const first = await Sandbox.create(template, { ...q, timeoutMs: 120_000 })
  const err = await rejection(Sandbox.create(template, { ...q, timeoutMs: 120_000 }))
  assert.ok(err instanceof RateLimitError, err.constructor.name)
  assert.match(err.message, /quota/)
  assert.equal((await Sandbox.list(q).nextItems()).length, 1)
  await first.kill()
})

await check('a call this server does not have answers in E2B shape, with a reason', async () => {
  const err = await rejection(Sandbox.listSnapshots().nextItems())
  assert.ok(err instanceof SandboxError, err.constructor.name)
  assert.match(err.message, /^501: .*not supported/)
})

await check('an unknown template is an error, and nothing is made', async () => {
  const before = (await Sandbox.list().nextItems()).length
  const err = await rejection(Sandbox.create('no-such-template'))
  assert.ok(err instanceof SandboxError, err.constructor.name)
  assert.equal((await Sandbox.list().nextItems()).length, before)
})

await mine.kill()
