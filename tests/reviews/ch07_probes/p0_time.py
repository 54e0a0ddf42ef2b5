from common import *
t=time.process_time(); run(False, LR, 0, 0); print("6-block 60 steps cpu s", time.process_time()-t)
t=time.process_time(); run(False, LR, 20, 0, depth=12); print("12-block 60 steps cpu s", time.process_time()-t)
