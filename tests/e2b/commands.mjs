// commands.mjs: commands.run (streamed output, exit code, background, kill,
// sendStdin, closeStdin, list, user, cwd, envs) and pty, through E2B's SDK.
import { Sandbox, CommandExitError } from 'e2b'
import { assert, check, rejection, template } from './check.mjs'

const sbx = await Sandbox.create(template, { timeoutMs: 300_000 })

await check('run: stdout, stderr and exit code 0', async () => {
  const r = await sbx.commands.run('echo out; echo err >&2; printf "%s" "no newline"')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out\nno newline')
  assert.equal(r.stderr, 'err\n')
})

await check('run: a non-zero exit is CommandExitError with its code and output', async () => {
  const err = await rejection(sbx.commands.run('echo partial; exit 7'))
  assert.ok(err instanceof CommandExitError, err.constructor.name)
  assert.equal(err.exitCode, 7)
  assert.equal(err.stdout, 'partial\n')
})

await check('run: output streams to onStdout and onStderr as it comes, in order', async () => {
  const out = [], err = []
  const t0 = Date.now(), at = []
  await sbx.commands.run('for i in 1 2 3; do echo $i; echo e$i >&2; sleep 0.3; done', {
    onStdout: d => { out.push(d); at.push(Date.now() - t0) }, onStderr: d => err.push(d),
  })
  assert.equal(out.join(''), '1\n2\n3\n')
  assert.equal(err.join(''), 'e1\ne2\ne3\n')
  assert.ok(out.length >= 2, `${out.length} chunks`)
  assert.ok(at[at.length - 1] - at[0] >= 300, `chunks ${JSON.stringify(at)} ms apart: not streamed`)
})

await check('run: envs, cwd and user', async () => {
  const r = await sbx.commands.run('echo "$A-$B"; pwd; id -u', { envs: { A: 'x', B: 'y z' }, cwd: '/tmp' })
  assert.equal(r.stdout, 'x-y z\n/tmp\n0\n')
  assert.equal((await sbx.commands.run('id -un', { user: 'user' })).stdout, 'user\n')
})

await check('run: binary-safe output of 1 MiB', async () => {
  const r = await sbx.commands.run('head -c 1048576 /dev/zero | tr "\\0" a')
  assert.equal(r.stdout.length, 1048576)
  assert.ok(/^a+$/.test(r.stdout))
})

await check('background: sendStdin reaches it, list shows it, kill ends it', async () => {
  const seen = []
  const h = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: d => seen.push(d) })
  assert.ok(h.pid > 0)
  await sbx.commands.sendStdin(h.pid, 'ping\n')
  const until = Date.now() + 10_000
  while (seen.join('') !== 'ping\n' && Date.now() < until) await new Promise(r => setTimeout(r, 50))
  assert.equal(seen.join(''), 'ping\n')
  const listed = await sbx.commands.list()
  assert.ok(listed.some(p => p.pid === h.pid && p.cmd === '/bin/bash'), JSON.stringify(listed))
  assert.equal(await sbx.commands.kill(h.pid), true)
  const err = await rejection(h.wait())
  assert.ok(err instanceof CommandExitError)
  assert.ok(!(await sbx.commands.list()).some(p => p.pid === h.pid))
  assert.equal(await sbx.commands.kill(h.pid), false)
})

await check('background: closeStdin ends its input', async () => {
  const h = await sbx.commands.run('wc -c', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'abcdef')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.stdout.trim(), '6')
})

await check('pty: input in, output out, resize, exit', async () => {
  let text = ''
  const pty = await sbx.pty.create({ cols: 100, rows: 30, onData: d => { text += new TextDecoder().decode(d) } })
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'))
  const until = Date.now() + 10_000
  while (!text.includes('pty-42') && Date.now() < until) await new Promise(r => setTimeout(r, 50))
  assert.ok(text.includes('30 100'), JSON.stringify(text))
  await sbx.pty.resize(pty.pid, { cols: 120, rows: 40 })
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; exit 3\n'))
  const r = await pty.wait().catch(e => e)
  assert.ok(text.includes('40 120'), JSON.stringify(text))
  assert.equal(r.exitCode, 3)
})

await sbx.kill()
