"""A cycled module in Python: it reads the collision guard and reports what it saw."""
import cycled


def recall(call: cycled.Call) -> dict:
    guard = call.inputs["collision_guard.result"]  # its value, with source, stale and age_ms
    if not guard.present:
        raise cycled.TransientError("no guard reading yet")  # retried within the tier's budget
    return {"clear": guard.value, "source": guard.source, "stale": guard.stale, "tick": call.tick_id}


if __name__ == "__main__":
    cycled.Module(recall, name="py-recall", tier="knowledge", reads=["collision_guard.result"]).run()
