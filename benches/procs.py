"""What benches/e2e.py and benches/restart.py both need: a free port, a wait for a
listener, and the processes below a process, read from /proc."""
import socket, time


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_listening(port, seconds=10):
    """True once 127.0.0.1:port accepts a connection, False after `seconds`."""
    end = time.time() + seconds
    while time.time() < end:
        try:
            socket.create_connection(('127.0.0.1', port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def children(pid):
    try:
        return [int(c) for c in open(f'/proc/{pid}/task/{pid}/children').read().split()]
    except OSError:
        return []


def tree_pids(root):
    """The process and all its descendants."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo += children(pid)
    return pids
